//! kill -9 of pgtier, and PostgreSQL stopped with `-m immediate`, at random
//! points while application transactions commit and propagate: after every
//! restart propagation resumes; at the end PostgreSQL equals the cache, and
//! the counter increments show no lost and no repeated transaction (every
//! acknowledged commit is in both). CI runs a few rounds; the full count:
//! `PGTIER_AWT_KILL_ROUNDS=40 cargo test --release -p pgtier-cache --test awt_crash -- --nocapture`.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::populate_tatp;
use pgtier_backend::connect::connect;
use pgtier_backend::harness::{ClusterOptions, PrivateCluster};
use pgtier_cache::{GroupKind, LoadOptions};
use pgtier_engine::Value;
use rand::{Rng, SeedableRng};

const ENV_DIR: &str = "PGTIER_AWT_CRASH_DIR";
const ENV_URL: &str = "PGTIER_AWT_CRASH_URL";
const ENV_SEED: &str = "PGTIER_AWT_CRASH_SEED";
const KEYS: i32 = 1000;

/// Child: increments counters, printing the increments acknowledged so far,
/// until killed. Every fifth transaction increments two subscribers (two
/// instances: it may span apply lanes).
#[test]
#[ignore = "the child process of a test in this file (run by it with --ignored)"]
fn awt_crash_child_entry() {
    let (Ok(dir), Ok(url), Ok(seed)) = (std::env::var(ENV_DIR), std::env::var(ENV_URL), std::env::var(ENV_SEED)) else { return };
    let cache = common::open_cache(Path::new(&dir), &url);
    let db = cache.database().clone();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let msc = subscriber.column_index("msc_location").unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed.parse().unwrap());
    let mut increments = 0u64;
    for i in 0u64.. {
        let mut txn = db.begin().unwrap();
        let keys = if i % 5 == 4 { 2 } else { 1 };
        for _ in 0..keys {
            let s = rng.random_range(1..=KEYS);
            txn.update_with(subscriber.id, &[Value::Int4(s)], |row| Ok(Some(vec![(msc, Value::Int4(row.get_i64(msc).unwrap_or(0) as i32 + 1))]))).unwrap();
        }
        txn.commit().unwrap();
        increments += keys;
        println!("ACK {increments}");
        if i % 50 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

#[test]
fn kills_of_either_side_lose_and_repeat_nothing() {
    let rounds: usize = std::env::var("PGTIER_AWT_KILL_ROUNDS").map_or(4, |v| v.parse().unwrap());
    let mut cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.create_database("awt_crash").unwrap();
    populate_tatp(&url);
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let cache = common::open_cache(dir.path(), &url);
        cache
            .create_group(&common::tatp_group("awt", GroupKind::Awt, false))
            .unwrap();
        cache.load("awt", &LoadOptions { predicate: Some(format!("s_id <= {KEYS}")), ..LoadOptions::default() }).unwrap();
        common::msc_sum(cache.database())
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(15);
    let mut acknowledged = 0u64;
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "awt_crash_child_entry", "--ignored", "--nocapture", "--test-threads=1"])
            .env(ENV_DIR, dir.path())
            .env(ENV_URL, &url)
            .env(ENV_SEED, round.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let kill_at = rng.random_range(50..700u64);
        let backend_crash_at = (round % 2 == 1).then(|| rng.random_range(10..kill_at));
        let mut last = 0;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        for line in lines.by_ref() {
            let Some(n) = line.unwrap().strip_prefix("ACK ").map(|n| n.parse::<u64>().unwrap()) else { continue };
            last = n;
            if Some(n) == backend_crash_at {
                // PostgreSQL dies mid-propagation; local commits go on meanwhile.
                cluster.stop_immediate().unwrap();
                std::thread::sleep(Duration::from_millis(rng.random_range(50..400)));
                cluster.restart().unwrap();
            }
            if n >= kill_at {
                break;
            }
        }
        assert!(last >= kill_at, "the child ended after {last} increments, before its kill: it failed (see its output above)");
        child.kill().unwrap();
        child.wait().unwrap();
        // Acknowledgements still in the pipe count too.
        for line in lines {
            if let Some(n) = line.unwrap().strip_prefix("ACK ").map(|n| n.parse::<u64>().unwrap()) {
                last = n;
            }
        }
        acknowledged += last;
        println!("round {round}: killed after {last} acknowledged increments (backend crash at {backend_crash_at:?})");
    }
    let cache = common::open_cache(dir.path(), &url);
    let mut client = connect(&url).unwrap();
    assert!(cache.wait_propagated(Duration::from_secs(120)), "{:?}", cache.propagation());
    let local = common::msc_sum(cache.database());
    let remote = common::postgres_msc_sum(&mut client, &format!("s_id <= {KEYS}"));
    assert_eq!(remote, local, "PostgreSQL must hold every committed increment exactly once");
    assert!(local >= before + acknowledged as i64, "an acknowledged commit was lost: {local} < {before} + {acknowledged}");
    assert!(local <= before + acknowledged as i64 + 2 * rounds as i64, "more commits than the children made");
    common::assert_tables_equal(cache.database(), &mut client, &format!("s_id <= {KEYS}"));
    drop(cache);
    drop(client);
    cluster.stop().unwrap();
}
