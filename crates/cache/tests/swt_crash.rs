//! SWT across crashes: kill -9 of pgtier (with the window between
//! PostgreSQL's commit and the cache's widened, so kills land in it), and
//! PostgreSQL stopped with `-m immediate`, while counter increments commit.
//! After every restart the in-doubt transactions are resolved from
//! PostgreSQL; at the end the cache equals PostgreSQL, every acknowledged
//! increment is in both, and nothing beyond the unacknowledged in-flight
//! ones was added. Every other round kills the child exactly inside that
//! window (it announces entering it), and the test requires each such kill
//! to be resolved at the restart, so the window is proven exercised, not
//! hoped for. CI runs a few rounds; the full count:
//! `PGTIER_SWT_KILL_ROUNDS=40 cargo test --release -p pgtier-cache --test swt_crash -- --nocapture`.
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

const ENV_DIR: &str = "PGTIER_SWT_CRASH_DIR";
const ENV_URL: &str = "PGTIER_SWT_CRASH_URL";
const ENV_SEED: &str = "PGTIER_SWT_CRASH_SEED";
const KEYS: i32 = 500;

/// Child: increments counters until killed, printing `ACK n` (increments
/// acknowledged so far) and `UNKNOWN k` for a commit whose outcome it was
/// not told (it may or may not count). Every fifth transaction increments
/// two subscribers.
#[test]
#[ignore = "the child process of a test in this file (run by it with --ignored)"]
fn swt_crash_child_entry() {
    let (Ok(dir), Ok(url), Ok(seed)) = (std::env::var(ENV_DIR), std::env::var(ENV_URL), std::env::var(ENV_SEED)) else {
        return;
    };
    let cache = common::open_cache(Path::new(&dir), &url);
    assert!(cache.wait_swt_resolved(Duration::from_secs(60)));
    println!("RESOLVED {}", cache.swt_status().unwrap().in_doubt_resolved.load(std::sync::atomic::Ordering::Relaxed));
    let db = cache.database().clone();
    let catalog = db.catalog();
    let subscriber = catalog.table_by_name("subscriber").unwrap();
    let msc = subscriber.column_index("msc_location").unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed.parse().unwrap());
    let mut increments = 0u64;
    for i in 0u64.. {
        let keys = if i % 5 == 4 { 2 } else { 1 };
        let mut txn = db.begin().unwrap();
        for _ in 0..keys {
            let s = rng.random_range(1..=KEYS);
            txn.update_with(subscriber.id, &[Value::Int4(s)], |row| {
                Ok(Some(vec![(msc, Value::Int8(row.get_i64(msc).unwrap_or(0) + 1))]))
            })
            .unwrap();
        }
        match txn.commit() {
            Ok(_) => {
                increments += keys;
                println!("ACK {increments}");
            }
            Err(error) => {
                if error.sqlstate() == "40003" {
                    println!("UNKNOWN {keys}");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

#[test]
fn kills_of_either_side_leave_both_equal_and_every_ack_in_both() {
    let rounds: usize = std::env::var("PGTIER_SWT_KILL_ROUNDS").map_or(4, |v| v.parse().unwrap());
    let mut cluster = PrivateCluster::start(ClusterOptions::default()).unwrap();
    let url = cluster.create_database("swt_crash").unwrap();
    populate_tatp(&url);
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let cache = common::open_cache(dir.path(), &url);
        cache.create_group(&common::tatp_group("swt", GroupKind::Swt, false)).unwrap();
        cache
            .load("swt", &LoadOptions { predicate: Some(format!("s_id <= {KEYS}")), ..LoadOptions::default() })
            .unwrap();
        common::msc_sum(cache.database())
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(16);
    let (mut acknowledged, mut unknown, mut resolved, mut window_kills) = (0u64, 0u64, 0u64, 0u64);
    for round in 0..rounds {
        // Even rounds kill inside the window, announced and widened so the
        // kill surely lands before the cache's commit; odd ones at random.
        let in_window = round % 2 == 0;
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "swt_crash_child_entry", "--ignored", "--nocapture", "--test-threads=1"])
            .env(ENV_DIR, dir.path())
            .env(ENV_URL, &url)
            .env(ENV_SEED, round.to_string())
            // Half the time between the two commits: about every other random kill lands there.
            .env("PGTIER_SWT_CRASH_WINDOW_US", if in_window { "300000" } else { "3000" })
            .stdout(Stdio::piped());
        if in_window {
            command.env("PGTIER_SWT_CRASH_WINDOW_ANNOUNCE", "1");
        }
        let mut child = command.spawn().unwrap();
        // (Every commit of a window round waits 300 ms: few of them.)
        let kill_at = if in_window { rng.random_range(3..8u64) } else { rng.random_range(20..300u64) };
        let backend_crash_at = (round % 2 == 1).then(|| rng.random_range(5..kill_at));
        let mut last = 0;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let count = |line: &str, last: &mut u64, unknown: &mut u64, resolved: &mut u64| {
            if let Some(n) = line.strip_prefix("ACK ") {
                *last = n.parse().unwrap();
            } else if let Some(k) = line.strip_prefix("UNKNOWN ") {
                *unknown += k.parse::<u64>().unwrap();
            } else if let Some((_, r)) = line.rsplit_once("RESOLVED ") {
                // The first line follows libtest's "test name ... ".
                *resolved += r.parse::<u64>().unwrap();
            }
        };
        for line in lines.by_ref() {
            let line = line.unwrap();
            count(&line, &mut last, &mut unknown, &mut resolved);
            if line.starts_with("ACK ") && Some(last) == backend_crash_at {
                // PostgreSQL dies; SWT commits fail meanwhile and resume after.
                cluster.stop_immediate().unwrap();
                std::thread::sleep(Duration::from_millis(rng.random_range(50..400)));
                cluster.restart().unwrap();
            }
            if last >= kill_at {
                break;
            }
        }
        assert!(
            last >= kill_at,
            "the child ended after {last} increments, before its kill: it failed (see its output above)"
        );
        if in_window {
            // Until the next commit announces the window (PostgreSQL
            // committed it, the cache not yet); a few lines at most.
            let mut announced = false;
            for line in lines.by_ref().take(100) {
                let line = line.unwrap();
                count(&line, &mut last, &mut unknown, &mut resolved);
                if line.ends_with("SWT-WINDOW") {
                    announced = true;
                    break;
                }
            }
            assert!(announced, "the child never announced the window (see its output above)");
            window_kills += 1;
        } else {
            // Somewhere in the next commit: its PostgreSQL round trip or the window after it.
            std::thread::sleep(Duration::from_micros(rng.random_range(0..8000)));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        for line in lines {
            count(&line.unwrap(), &mut last, &mut unknown, &mut resolved);
        }
        acknowledged += last;
        println!(
            "round {round}: killed after {last} acknowledged increments (backend crash at {backend_crash_at:?}, unknown so far {unknown}, resolved so far {resolved})"
        );
    }
    let cache = common::open_cache(dir.path(), &url);
    assert!(
        cache.wait_swt_resolved(Duration::from_secs(60)),
        "in-doubt transactions not resolved: {:?}",
        cache.swt_status().unwrap()
    );
    resolved += cache.swt_status().unwrap().in_doubt_resolved.load(std::sync::atomic::Ordering::Relaxed);
    let mut client = connect(&url).unwrap();
    let local = common::msc_sum(cache.database());
    let remote = common::postgres_msc_sum(&mut client, &format!("s_id <= {KEYS}"));
    println!(
        "increments: acknowledged {acknowledged}, outcome unknown {unknown}, in the cache {}, in-doubt transactions resolved at restarts {resolved} (kills inside the window: {window_kills})",
        local - before
    );
    assert!(
        resolved >= window_kills && window_kills > 0,
        "every kill inside the window leaves a transaction to resolve: {resolved} resolved, {window_kills} such kills"
    );
    assert_eq!(remote, local, "the cache must equal PostgreSQL after resolution");
    assert!(
        local >= before + acknowledged as i64,
        "an acknowledged commit was lost: {local} < {before} + {acknowledged}"
    );
    assert!(
        local <= before + (acknowledged + unknown) as i64 + 2 * rounds as i64,
        "more commits than the children made"
    );
    common::assert_tables_equal(cache.database(), &mut client, &format!("s_id <= {KEYS}"));
    drop(cache);
    drop(client);
    cluster.stop().unwrap();
}
