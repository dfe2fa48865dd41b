//! Autorefresh across crashes: while a writer changes PostgreSQL without
//! pause (updates, inserts and deletes of children and of whole instances,
//! several per transaction), pgtier is killed with SIGKILL at random points
//! and PostgreSQL is stopped fast or immediately and started again. At the
//! end the cache equals PostgreSQL row for row, `verify` is clean, and the
//! group has still one slot. CI runs a few rounds; the full count (20
//! kills of pgtier, 10 fast and 10 immediate PostgreSQL restarts):
//! `PGTIER_AR_KILL_ROUNDS=20 cargo test --release -p pgtier-cache --test autorefresh_crash -- --nocapture`.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{assert_tables_equal, populate_tatp, tatp_group};
use pgtier_backend::connect::connect;
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_cache::{GroupKind, LoadOptions};
use rand::{Rng, SeedableRng};

const ENV_DIR: &str = "PGTIER_AR_CRASH_DIR";
const ENV_URL: &str = "PGTIER_AR_CRASH_URL";

/// Child: opens the cache (its autorefresh worker resumes) and reports how
/// many transactions it applied until killed.
#[test]
#[ignore = "the child process of a test in this file (run by it with --ignored)"]
fn autorefresh_crash_child_entry() {
    let (Ok(dir), Ok(url)) = (std::env::var(ENV_DIR), std::env::var(ENV_URL)) else { return };
    let cache = common::open_cache(Path::new(&dir), &url);
    println!("READY");
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if let Some(status) = cache.autorefresh_status().first() {
            println!(
                "APPLIED {} RESNAPSHOTS {}",
                status.applied_txns.load(Ordering::Relaxed),
                status.resnapshots.load(Ordering::Relaxed)
            );
        }
    }
}

/// One random transaction of the writer.
fn change(
    client: &mut postgres::Client,
    rng: &mut rand::rngs::StdRng,
    next_subscriber: &AtomicU64,
) -> Result<(), postgres::Error> {
    let s = rng.random_range(1..=common::SUBSCRIBERS as i32);
    let value = rng.random_range(0..1_000_000i64);
    let mut txn = client.transaction()?;
    for _ in 0..rng.random_range(1..=3) {
        match rng.random_range(0..10) {
            0..=3 => {
                txn.execute("UPDATE subscriber SET msc_location = $2::int8, vlr_location = CASE WHEN $2::int8 % 5 = 0 THEN NULL ELSE $2::int8 END WHERE s_id = $1", &[&s, &value])?;
            }
            4 => {
                txn.execute(
                    "UPDATE access_info SET data1 = ($2::int8 % 256)::smallint, data3 = 'w' WHERE s_id = $1",
                    &[&s, &value],
                )?;
            }
            5 | 6 => {
                let start = (value % 3 * 8) as i16;
                txn.execute("INSERT INTO call_forwarding SELECT s_id, sf_type, $2::int2, ($2::int2 + 8)::int2, 'w' FROM special_facility WHERE s_id = $1 ON CONFLICT DO NOTHING", &[&s, &start])?;
            }
            7 => {
                txn.execute("DELETE FROM call_forwarding WHERE s_id = $1", &[&s])?;
            }
            8 => {
                // A whole new instance.
                let id = next_subscriber.fetch_add(1, Ordering::Relaxed) as i32;
                txn.execute("INSERT INTO subscriber (s_id, sub_nbr, bit_1, hex_1, byte2_1, msc_location, vlr_location) VALUES ($1::int4, lpad(($1::int4)::text, 15, '0'), 1, 1, 1, $2::int8, NULL)", &[&id, &value])?;
                txn.execute("INSERT INTO access_info VALUES ($1, 1, 1, 1, 'x', 'y')", &[&id])?;
                txn.execute("INSERT INTO special_facility VALUES ($1, 1, 1, 0, 1, 'z')", &[&id])?;
                txn.execute("INSERT INTO call_forwarding VALUES ($1, 1, 0, 8, 'n')", &[&id])?;
            }
            _ => {
                // A whole instance goes, children first (no cascades in TATP).
                for table in ["call_forwarding", "special_facility", "access_info", "subscriber"] {
                    txn.execute(&format!("DELETE FROM {table} WHERE s_id = $1"), &[&s])?;
                }
            }
        }
    }
    txn.commit()
}

#[test]
fn kills_of_pgtier_and_restarts_of_postgres_lose_and_duplicate_nothing() {
    let rounds: usize = std::env::var("PGTIER_AR_KILL_ROUNDS").map_or(4, |v| v.parse().unwrap());
    let mut cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.create_database("ar_crash").unwrap();
    populate_tatp(&url);
    let dir = tempfile::tempdir().unwrap();
    {
        let cache = common::open_cache(dir.path(), &url);
        cache
            .create_group(&pgtier_cache::CreateGroup {
                autorefresh: true,
                ..tatp_group("tatp", GroupKind::ReadOnly, false)
            })
            .unwrap();
        cache.load("tatp", &LoadOptions::default()).unwrap();
    }
    // The writer: PostgreSQL's own sessions, reconnecting through restarts.
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, committed, url) = (stop.clone(), committed.clone(), url.clone());
        std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let next_subscriber = AtomicU64::new(u64::from(common::SUBSCRIBERS) + 1);
            let mut client = None;
            while !stop.load(Ordering::Relaxed) {
                let Some(c) = client.as_mut() else {
                    client = connect(&url).ok();
                    if client.is_none() {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    continue;
                };
                match change(c, &mut rng, &next_subscriber) {
                    Ok(()) => {
                        committed.fetch_add(1, Ordering::Relaxed);
                    }
                    // PostgreSQL going down or coming up: reconnect.
                    Err(error)
                        if error.is_closed()
                            || error
                                .code()
                                .is_none_or(|c| c.code().starts_with("57") || c.code().starts_with("08")) =>
                    {
                        client = None;
                    }
                    Err(error) => panic!("the writer's transaction failed: {error:?}"),
                }
                std::thread::sleep(Duration::from_micros(500));
            }
        })
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(20);
    let (mut fast, mut immediate) = (0, 0);
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "autorefresh_crash_child_entry", "--ignored", "--nocapture", "--test-threads=1"])
            .env(ENV_DIR, dir.path())
            .env(ENV_URL, &url)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines.by_ref().map(|l| l.unwrap()).any(|l| l.ends_with("READY"));
        assert!(ready, "the child failed before it was ready (see its output above)");
        let lives = Duration::from_millis(rng.random_range(200..2500));
        // Every round PostgreSQL goes down too, alternately fast and immediate.
        let crash_backend = true;
        let backend_at = Duration::from_millis(rng.random_range(50..lives.as_millis() as u64));
        let started = Instant::now();
        let mut last = String::new();
        let mut crashed = false;
        while started.elapsed() < lives {
            if crash_backend && !crashed && started.elapsed() >= backend_at {
                crashed = true;
                if round % 2 == 0 {
                    cluster.stop_fast().unwrap();
                    fast += 1;
                } else {
                    cluster.stop_immediate().unwrap();
                    immediate += 1;
                }
                std::thread::sleep(Duration::from_millis(rng.random_range(50..500)));
                cluster.restart().unwrap();
            }
            // The child prints every 100 ms; reading keeps its pipe from filling.
            if let Some(Ok(line)) = lines.next() {
                last = line;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        println!(
            "round {round}: killed after {} ms ({last}); PostgreSQL restarted: {crashed}; transactions committed in PostgreSQL so far: {}",
            lives.as_millis(),
            committed.load(Ordering::Relaxed)
        );
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let cache = common::open_cache(dir.path(), &url);
    assert!(cache.wait_autorefreshed("tatp", Duration::from_secs(120)).unwrap(), "{:?}", cache.autorefresh_status());
    let mut client = connect(&url).unwrap();
    assert_tables_equal(cache.database(), &mut client, "true");
    let tally = cache.verify("tatp").unwrap();
    assert!(tally.is_clean(), "{tally:?}");
    let slots: i64 = client.query_one("SELECT count(*) FROM pg_replication_slots", &[]).unwrap().get(0);
    assert_eq!(slots, 1, "one slot for the one group, whatever crashed");
    let status = cache.autorefresh_status();
    println!(
        "{rounds} kills of pgtier, {fast} fast and {immediate} immediate PostgreSQL restarts, {} transactions committed in PostgreSQL: cache equals PostgreSQL; re-snapshots after reopen {}",
        committed.load(Ordering::Relaxed),
        status[0].resnapshots.load(Ordering::Relaxed)
    );
    assert!(committed.load(Ordering::Relaxed) > 100, "the writer must have written");
    drop(cache);
    drop(client);
    cluster.stop().unwrap();
}
