//! LOAD, REFRESH and UNLOAD in a loop beside application writers (updates,
//! deletes and re-inserts of whole instances of a parent/child group), for
//! AWT and SWT groups: when the writers stop and write-through has drained,
//! a final LOAD makes the cache equal to PostgreSQL row for row, and VERIFY
//! is clean. A load that put a snapshot's older image over a newer commit,
//! brought a deleted instance back or dropped one with unpropagated changes
//! shows here as a row only one side has (`fence.rs`).
//!
//! The writers together offer a paced rate (`PGTIER_BESIDE_RATE`, commits
//! per second): unpaced, embedded writers commit faster than AWT's apply
//! path drains, and every AWT load would then be refused with 55000
//! ("write-through is not keeping up"), which the loader counts and the
//! run requires to be the exception.
//!
//! CI runs one short run of each kind; the full count (quoted in issue 30's note):
//! `PGTIER_BESIDE_RUNS=20 PGTIER_BESIDE_SECONDS=30 PGTIER_BESIDE_WRITERS=6 PGTIER_BESIDE_RATE=3000 cargo test --release -p pgtier-cache --test beside_writers -- --nocapture --test-threads=1`.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pgtier_backend::connect::connect;
use pgtier_cache::{Cache, CreateGroup, GroupKind, LoadOptions};
use pgtier_engine::{Database, EngineError, Value};
use rand::{Rng, SeedableRng};

const INSTANCES: i32 = 400;
/// Each parent has children n = 1 and n = 2.
const CHILDREN: [i16; 2] = [1, 2];

#[derive(Default)]
struct Tally {
    commits: AtomicU64,
    deletes: AtomicU64,
    reinserts: AtomicU64,
    /// Commits refused because a load held the rows (40001 / 55P03): the application retries.
    refused: AtomicU64,
}

/// Errors an application commit may meet beside a load: retried, counted.
fn is_retryable(error: &EngineError) -> bool {
    matches!(error.sqlstate(), "40001" | "55P03")
}

/// One writer: instances `(k - 1) % writers == me` are its own, so writers never
/// conflict with each other, only with the loads. An instance present is
/// updated (parent and both children) or deleted whole; one this writer
/// deleted is inserted again. An instance absent because a load removed it
/// is left alone (PostgreSQL still has it; inserting it would be the
/// application's duplicate key, not the cache's).
fn writer(db: &Database, me: i32, writers: i32, interval: Duration, seed: u64, stop: &AtomicBool, tally: &Tally) {
    let catalog = db.catalog();
    let (parent, child) = (catalog.table_by_name("p").unwrap().id, catalog.table_by_name("c").unwrap().id);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut deleted: HashSet<i32> = HashSet::new();
    // What this writer did to each instance, newest last (for a failure's message).
    let mut history: std::collections::HashMap<i32, Vec<String>> = std::collections::HashMap::new();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        next += interval;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let k = rng.random_range(0..INSTANCES / writers) * writers + me + 1;
        if k > INSTANCES {
            continue;
        }
        let key = [Value::Int4(k)];
        let mut txn = db.begin().unwrap();
        let present = txn.get_with(parent, &key, |_| ()).unwrap().is_some();
        // A load may remove the instance between the read and the write
        // (UNLOAD, REFRESH): the write then finds no row, as a DELETE of a row
        // deleted meanwhile does in PostgreSQL, and PostgreSQL's row stays.
        // Such a transaction is rolled back and nothing is recorded.
        let outcome = if present && rng.random_range(0..5) == 0 {
            (|| {
                let mut found = true;
                for n in CHILDREN {
                    found &= txn.delete(child, &[Value::Int4(k), Value::Int2(n)])?;
                }
                found &= txn.delete(parent, &key)?;
                if !found {
                    txn.rollback();
                    return Ok(None);
                }
                txn.commit().map(|_| Some(true))
            })()
        } else if present {
            (|| {
                let bump = |column: usize| {
                    move |row: pgtier_engine::RowRef<'_>| {
                        Ok(Some(vec![(column, Value::Int4(row.get_i64(column).unwrap_or(0) as i32 + 1))]))
                    }
                };
                txn.update_with(parent, &key, bump(1))?;
                for n in CHILDREN {
                    txn.update_with(child, &[Value::Int4(k), Value::Int2(n)], bump(2))?;
                }
                txn.commit()
            })()
            .map(|_| None)
        } else if deleted.contains(&k) {
            (|| {
                txn.insert(parent, &[Value::Int4(k), Value::Int4(1000 + k)])?;
                for n in CHILDREN {
                    txn.insert(child, &[Value::Int4(k), Value::Int2(n), Value::Int4(k * 10 + i32::from(n))])?;
                }
                txn.commit()
            })()
            .map(|_| Some(false))
        } else {
            txn.commit().unwrap();
            continue;
        };
        let entry = history.entry(k).or_default();
        let what = match &outcome {
            Ok(Some(true)) => "delete".to_owned(),
            Ok(Some(false)) => "re-insert".to_owned(),
            Ok(None) => "update (or rolled back: unloaded meanwhile)".to_owned(),
            Err(error) => {
                format!("{} failed: {} {error}", if present { "update/delete" } else { "re-insert" }, error.sqlstate())
            }
        };
        entry.push(format!(
            "{:.6} {what}",
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
        ));
        if entry.len() > 8 {
            entry.remove(0);
        }
        match outcome {
            Ok(change) => {
                tally.commits.fetch_add(1, Ordering::Relaxed);
                match change {
                    Some(true) => {
                        deleted.insert(k);
                        tally.deletes.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(false) => {
                        deleted.remove(&k);
                        tally.reinserts.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {}
                }
            }
            Err(error) if is_retryable(&error) => {
                tally.refused.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                panic!("writer {me}, instance {k}: {error}; this writer's last operations on it: {:?}", history.get(&k))
            }
        }
    }
}

/// Counts of the loader's operations, and of those refused while another held the group.
#[derive(Default, Debug)]
struct LoaderTally {
    loads: u64,
    refreshes: u64,
    unloads: u64,
    /// Refused with 55000 (write-through behind), 55P03 or 40001: an error, never a wrong cache.
    refused: u64,
    /// Instances the operations moved: added by LOAD, read again or removed
    /// by REFRESH, removed by UNLOAD, and left alone by either for changes
    /// not yet in PostgreSQL or rows a writer held.
    loaded: u64,
    reloaded: u64,
    removed: u64,
    unloaded: u64,
    skipped: u64,
}

/// LOAD (some ranges, sometimes everything), REFRESH and UNLOAD of random
/// ranges of instances, until `stop`.
/// `done` counts the operations of each kind (load, refresh, unload) as
/// they end, so the run can last until each has happened beside writers.
fn loader(cache: &Cache, seed: u64, stop: &AtomicBool, done: &[AtomicU64; 3]) -> LoaderTally {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut tally = LoaderTally::default();
    let keys = |from: i32, count: i32| -> Vec<Vec<Value>> {
        (from..from + count).filter(|k| *k <= INSTANCES).map(|k| vec![Value::Int4(k)]).collect()
    };
    while !stop.load(Ordering::Relaxed) {
        let from = rng.random_range(1..=INSTANCES);
        let kind = rng.random_range(0..3);
        let result = match kind {
            0 => {
                let predicate = (rng.random_range(0..4) != 0).then(|| format!("id BETWEEN {from} AND {}", from + 80));
                tally.loads += 1;
                cache
                    .load("g", &LoadOptions { predicate, ..LoadOptions::default() })
                    .map(|report| tally.loaded += report.instances)
            }
            1 => {
                // REFRESH ... WHERE as the SQL layer runs it: the predicate
                // picks what is read again, the keys what may be removed.
                tally.refreshes += 1;
                let (predicate, keys) = if rng.random_range(0..4) != 0 {
                    (Some(format!("id BETWEEN {from} AND {}", from + 59)), keys(from, 60))
                } else {
                    (None, keys(1, INSTANCES))
                };
                cache.refresh("g", &keys, &LoadOptions { predicate, ..LoadOptions::default() }).map(|report| {
                    tally.reloaded += report.reloaded;
                    tally.removed += report.removed;
                    tally.skipped += report.skipped_dirty;
                })
            }
            _ => {
                tally.unloads += 1;
                cache.unload("g", Some(&keys(from, 40))).map(|report| {
                    tally.unloaded += report.instances;
                    tally.skipped += report.skipped_dirty + report.skipped_locked;
                })
            }
        };
        if let Err(error) = result {
            assert!(matches!(error.sqlstate(), "55000" | "55P03" | "40001"), "a load beside writers failed: {error}");
            tally.refused += 1;
        }
        done[kind].fetch_add(1, Ordering::Relaxed);
    }
    tally
}

/// Every row of `table` in PostgreSQL, formatted as `common::cache_dump` does.
fn postgres_rows(client: &mut postgres::Client, table: &str) -> Vec<String> {
    let columns = if table == "p" { "id, v" } else { "id, n, v" };
    let mut rows: Vec<String> = client
        .query(&format!("SELECT concat_ws('|', {columns}) FROM {table}"), &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    rows.sort();
    rows
}

fn run(kind: GroupKind, run: u64, seconds: u64, writers: i32, rate: u64) {
    let label = format!("{kind:?}").to_lowercase();
    let url = pgtier_backend::harness::shared_cluster()
        .unwrap()
        .create_database(&format!("beside_{label}_{run}_{}", std::process::id()))
        .unwrap();
    let mut client = connect(&url).unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE p (id int PRIMARY KEY, v int NOT NULL);
             CREATE TABLE c (id int REFERENCES p, n smallint, v int NOT NULL, PRIMARY KEY (id, n));
             INSERT INTO p SELECT g, g FROM generate_series(1, {INSTANCES}) g;
             INSERT INTO c SELECT g, n, g * 10 + n FROM generate_series(1, {INSTANCES}) g, generate_series(1, 2) n;
             CREATE TABLE audit (at timestamptz DEFAULT clock_timestamp(), xid xid8 DEFAULT pg_current_xact_id(), pid int DEFAULT pg_backend_pid(), app text DEFAULT current_setting('application_name'), op text, id int);
             CREATE FUNCTION audit_p() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO audit (op, id) VALUES (TG_OP, coalesce(NEW.id, OLD.id)); RETURN NULL; END $$;
             CREATE TRIGGER audit_p AFTER INSERT OR DELETE ON p FOR EACH ROW EXECUTE FUNCTION audit_p();"
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache: Arc<Cache> = common::open_cache(dir.path(), &url);
    let group = CreateGroup { root: "p".into(), children: vec!["c".into()], ..common::tatp_group("g", kind, false) };
    cache.create_group(&group).unwrap();
    cache.load("g", &LoadOptions::default()).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|me| {
            let (db, stop, tally) = (cache.database().clone(), stop.clone(), tally.clone());
            let interval = Duration::from_secs_f64(f64::from(writers) / rate as f64);
            std::thread::spawn(move || writer(&db, me, writers, interval, run * 100 + me as u64, &stop, &tally))
        })
        .collect();
    let done: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let loading = {
        let (cache, stop, done) = (cache.clone(), stop.clone(), done.clone());
        std::thread::spawn(move || loader(&cache, run, &stop, &done))
    };
    std::thread::sleep(Duration::from_secs(seconds));
    // On a loaded machine a few seconds may hold only a handful of loader
    // operations: go on until each kind ran a few times beside the writers.
    while done.iter().any(|n| n.load(Ordering::Relaxed) < 3) && started.elapsed() < Duration::from_secs(180) {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for (me, thread) in threads.into_iter().enumerate() {
        if let Err(panic) = thread.join() {
            let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
            let id: Option<i32> =
                text.split("instance ").nth(1).and_then(|t| t.split(':').next()).and_then(|t| t.parse().ok());
            let audit: Vec<String> = client
                .query("SELECT format('%s xid %s pid %s app %s %s', extract(epoch FROM at), xid, pid, app, op) FROM audit WHERE id = $1 ORDER BY at DESC LIMIT 8", &[&id.unwrap_or(0)])
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            panic!(
                "writer {me} failed: {text}\nPostgreSQL's inserts and deletes of that instance, newest first: {audit:#?}\nSWT: {:?}",
                cache.swt_status().map(|s| format!("{s:?}"))
            );
        }
    }
    let loads = loading.join().unwrap();
    let stopped = Instant::now();
    match kind {
        GroupKind::Awt => assert!(
            cache.wait_propagated(Duration::from_secs(60)),
            "write-through did not drain: {:?}",
            cache.propagation_info()
        ),
        _ => assert!(cache.wait_swt_resolved(Duration::from_secs(60)), "SWT did not resolve its commits"),
    }
    let drained = stopped.elapsed();
    let report = cache.load("g", &LoadOptions::default()).unwrap();
    for table in ["p", "c"] {
        let (cached, expected) = (common::cache_dump(cache.database(), table), postgres_rows(&mut client, table));
        let only_cached: Vec<&String> = cached.iter().filter(|l| expected.binary_search(l).is_err()).take(5).collect();
        let only_postgres: Vec<&String> =
            expected.iter().filter(|l| cached.binary_search(l).is_err()).take(5).collect();
        assert!(
            cached == expected,
            "{label} run {run}, {table}: {} rows cached, {} in PostgreSQL; only cached (first 5): {only_cached:?}; only in PostgreSQL: {only_postgres:?}",
            cached.len(),
            expected.len()
        );
    }
    let verify = cache.verify("g").unwrap();
    assert!(verify.is_clean() && verify.not_cached == 0, "{label} run {run}: VERIFY {verify:?}");
    let (commits, deletes, reinserts) = (
        tally.commits.load(Ordering::Relaxed),
        tally.deletes.load(Ordering::Relaxed),
        tally.reinserts.load(Ordering::Relaxed),
    );
    println!(
        "{label} run {run}: {:.1} s, {writers} writers offering {rate} commits/s: {commits} commits ({deletes} instance deletes, {reinserts} re-inserts, {} refused beside a load); loader {loads:?}; drained {:.2} s after the writers stopped; final LOAD added {} instances; equal, VERIFY clean ({} instances)",
        started.elapsed().as_secs_f64(),
        tally.refused.load(Ordering::Relaxed),
        drained.as_secs_f64(),
        report.instances,
        verify.compared
    );
    // The run must have exercised what it claims to.
    assert!(deletes > 0 && reinserts > 0 && commits > 100, "too little writing to mean anything");
    assert!(loads.loaded > 0 && loads.reloaded > 0 && loads.unloaded > 0, "the loads moved no instances: {loads:?}");
    assert!(
        loads.refused * 10 <= loads.loads + loads.refreshes + loads.unloads,
        "more than a tenth of the loader's operations were refused: {loads:?}"
    );
    cache.shutdown();
    drop(cache);
    // The run's node is gone for good (else the 13th run finds no origin slot).
    common::drop_node_origins(&mut client, &common::node_of(dir.path()));
}

fn runs(kind: GroupKind) {
    let (count, seconds, writers) = (
        common::env_u64("PGTIER_BESIDE_RUNS", 1),
        common::env_u64("PGTIER_BESIDE_SECONDS", 8),
        common::env_u64("PGTIER_BESIDE_WRITERS", 6),
    );
    let rate = common::env_u64("PGTIER_BESIDE_RATE", 3000);
    for r in 0..count {
        run(kind, r, seconds, writers as i32, rate);
    }
}

#[test]
fn awt_loads_beside_writers_leave_cache_equal_to_postgres() {
    runs(GroupKind::Awt);
}

#[test]
fn swt_loads_beside_writers_leave_cache_equal_to_postgres() {
    runs(GroupKind::Swt);
}
