//! kill -9 during LOAD: after reopening, the cache holds whole instances
//! only, and at least every batch the child saw committed. The test binary
//! re-runs itself as the child (see the engine's crash.rs).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{SUBSCRIBERS, cache_dump, check_whole_instances, engine_with_group, tatp_spec, tatp_url};
use pgtier_backend::connect::connect;
use pgtier_cache::{LoadOptions, LoadProgress, define_group, load_group};
use pgtier_engine::{Database, EngineConfig};

const ENV_DIR: &str = "PGTIER_CACHE_CRASH_DIR";
const ENV_URL: &str = "PGTIER_CACHE_CRASH_URL";
/// The parent kills the child once this many instances are committed.
const KILL_AFTER_INSTANCES: u64 = 300;

/// Child: load everything in small batches, printing committed instances until killed.
#[test]
#[ignore = "the child process of a test in this file (run by it with --ignored)"]
fn crash_child_entry() {
    let (Ok(dir), Ok(url)) = (std::env::var(ENV_DIR), std::env::var(ENV_URL)) else { return };
    let db = Database::open(Path::new(&dir), EngineConfig::default()).unwrap();
    let group = define_group(&mut connect(&url).unwrap(), &tatp_spec()).unwrap();
    let progress = Arc::new(LoadProgress::default());
    let reporter = progress.clone();
    std::thread::spawn(move || {
        loop {
            println!("COMMITTED {}", reporter.instances());
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let options = LoadOptions { parallel: 2, batch_instances_max: 5, progress, ..LoadOptions::default() };
    load_group(&db, || connect(&url).map_err(|e| panic!("{e}")), &group, &options).unwrap();
    println!("DONE");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn kill_9_during_load_leaves_whole_instances() {
    let url = tatp_url();
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = engine_with_group(dir.path(), &url);
    db.close().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child_entry", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ENV_DIR, dir.path())
        .env(ENV_URL, &url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut committed = 0;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        assert_ne!(line, "DONE", "the load finished before the kill");
        if let Some(n) = line.strip_prefix("COMMITTED ") {
            committed = n.parse().unwrap();
            if committed >= KILL_AFTER_INSTANCES {
                break;
            }
        }
    }
    assert!(
        committed >= KILL_AFTER_INSTANCES,
        "the child ended after {committed} instances, before its kill: it failed (see its output above)"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let db = Database::open(dir.path(), EngineConfig::default()).unwrap();
    let loaded = cache_dump(&db, "subscriber").len() as u64;
    assert!(loaded >= committed && loaded < u64::from(SUBSCRIBERS), "{loaded} loaded, {committed} reported committed");
    check_whole_instances(&db, &url);
    db.verify().unwrap();
}
