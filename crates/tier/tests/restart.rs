//! Restarts: from an index checkpoint (with and without the right token),
//! from a scan, after a crash at various points.

mod common;

use std::collections::HashMap;
use std::os::unix::fs::FileExt;

use common::{config, key, open, value};
use pgtier_tier::{FlashStore, Retention, TierConfig, Warm};

/// key → (value, retention) the store must hold.
type Model = HashMap<Vec<u8>, (Vec<u8>, Retention)>;

/// Retention of key number `i`: one in ten Durable (each costs an
/// fdatasync), the rest Keep or Evictable.
fn retention_of(i: u64) -> Retention {
    match (i % 10, i % 2) {
        (9, _) => Retention::Durable,
        (_, 0) => Retention::Keep,
        _ => Retention::Evictable,
    }
}

fn fill(store: &FlashStore, model: &mut Model, from: u64, n: u64, version: u64) {
    fill_with(store, model, from, n, version, retention_of);
}

fn fill_with(store: &FlashStore, model: &mut Model, from: u64, n: u64, version: u64, r: fn(u64) -> Retention) {
    for i in from..from + n {
        let r = r(i);
        let v = value(i, version, 40 + (i % 200) as usize);
        store.insert(&key(i), &v, r).expect("insert");
        model.insert(key(i), (v, r));
    }
}

/// Every record of the model is there with its value; nothing else is.
fn check_exact(store: &FlashStore, model: &Model) {
    for (k, want) in model {
        assert_eq!(store.get(k).expect("get").as_ref(), Some(want), "key {}", String::from_utf8_lossy(k));
    }
    assert_eq!(store.stats().records, model.len() as u64);
}

/// True when `v` is a value `fill` inserted for key number `i` (some version).
fn some_version_of(i: u64, v: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&v[..v.len().min(24)]).into_owned();
    let Some(rest) = text.strip_prefix(&format!("v{i}.")) else { return false };
    let Some(version) = rest.split(':').next().and_then(|x| x.parse::<u64>().ok()) else { return false };
    v == value(i, version, v.len()).as_slice()
}

/// After an unclean restart: Durable records are exactly the last ones;
/// a droppable record found is some version really inserted for its key
/// (the newest may have been lost with the DRAM buffer: `clean` is false,
/// and the caller drops droppable records).
fn check_durable_and_never_wrong(store: &FlashStore, model: &Model, keys: impl Iterator<Item = u64>) {
    for i in keys {
        let k = key(i);
        let got = store.get(&k).expect("get");
        match (model.get(&k), &got) {
            (Some(want), _) if want.1 == Retention::Durable => assert_eq!(got.as_ref(), Some(want), "durable {i}"),
            (_, Some((v, r))) => {
                assert!(*r != Retention::Durable || model.contains_key(&k), "removed durable {i} came back");
                assert!(some_version_of(i, v), "key {i}: a value never inserted for it");
            }
            (_, None) => {}
        }
    }
}

#[test]
fn warm_restart_with_the_token_reads_no_region() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 32);
    let (store, _) = open(&c, b"T1");
    let mut model = Model::new();
    fill(&store, &mut model, 0, 3000, 0);
    fill(&store, &mut model, 0, 500, 1); // replacements
    for i in (1000..1300).step_by(2) {
        assert!(store.remove(&key(i)).expect("remove"));
        model.remove(&key(i));
    }
    let before = store.stats();
    store.close(b"T1").expect("close");
    let (store, report) = open(&c, b"T1");
    assert_eq!((report.warm, report.token_matched, report.clean), (Warm::FromIndex, true, true), "{report:?}");
    assert_eq!(report.regions_scanned, 0);
    assert_eq!(report.records, model.len() as u64);
    // The region headers (one aligned block each) and the index file, nothing more.
    assert!(!dir.path().join("flash.tier.index").exists(), "the checkpoint is consumed by the open");
    let needed = 32 * 4096 + before.index_bytes + 64 * 32 + 1024;
    assert!(report.bytes_read <= needed, "{} bytes read, {needed} needed", report.bytes_read);
    check_exact(&store, &model);
    let after = store.stats();
    assert_eq!(
        (after.live_bytes, after.durable_bytes, after.keep_records),
        (before.live_bytes, before.durable_bytes, before.keep_records)
    );
    // The checkpoint vouched for one open: a crash now means a scan.
    drop(store);
    assert!(!dir.path().join("flash.tier.index").exists());
    let (store, report) = open(&c, b"T1");
    assert_eq!((report.warm, report.token_matched, report.clean), (Warm::FromScan, false, false));
    assert!(report.regions_scanned > 0);
    check_durable_and_never_wrong(&store, &model, 0..3000);
}

#[test]
fn another_token_scans_and_recovers_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 32);
    let (store, _) = open(&c, b"T1");
    let mut model = Model::new();
    fill(&store, &mut model, 0, 2000, 0);
    store.close(b"T1").expect("close");
    let (store, report) = open(&c, b"T2");
    assert_eq!((report.warm, report.token_matched, report.clean), (Warm::FromScan, false, false));
    // A scan finds every record (no removal happened): the caller decides.
    check_exact(&store, &model);
    assert_eq!(store.drop_droppable(), 2000 - 200);
    model.retain(|_, (_, r)| *r == Retention::Durable);
    check_exact(&store, &model);
}

#[test]
fn crash_after_a_running_checkpoint_scans_only_newer_regions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 64);
    let (store, _) = open(&c, b"T");
    let mut model = Model::new();
    fill(&store, &mut model, 0, 3000, 0);
    store.checkpoint(b"T").expect("checkpoint");
    fill(&store, &mut model, 3000, 500, 0);
    fill(&store, &mut model, 0, 300, 2);
    for i in (9..600).step_by(10) {
        // Durable removals after the checkpoint: tombstones must hide them.
        assert!(store.remove(&key(i)).expect("remove"));
        model.remove(&key(i));
    }
    let regions = store.stats().regions_reclaimed;
    assert_eq!(regions, 0, "this test wants no reclamation");
    drop(store); // a crash: no close
    let (store, report) = open(&c, b"T");
    assert_eq!((report.warm, report.token_matched, report.clean), (Warm::FromIndex, true, false), "{report:?}");
    assert!(report.regions_scanned >= 1);
    // No droppable record was removed after the checkpoint, so all is exact.
    check_exact(&store, &model);
}

#[test]
fn reclamation_after_a_checkpoint_is_seen_at_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 16);
    let (store, _) = open(&c, b"T");
    let mut model = Model::new();
    fill(&store, &mut model, 0, 600, 0);
    store.checkpoint(b"T").expect("checkpoint");
    // Enough churn to reclaim every region the checkpoint knew.
    let droppable = |i| if i % 2 == 0 { Retention::Keep } else { Retention::Evictable };
    for round in 1..14 {
        fill_with(&store, &mut model, 1000, 1500, round, droppable);
    }
    assert!(store.stats().regions_reclaimed >= 16, "{:?}", store.stats());
    drop(store);
    let (store, report) = open(&c, b"T");
    assert_eq!(report.warm, Warm::FromIndex);
    check_durable_and_never_wrong(&store, &model, (0..600).chain(1000..2500));
    for i in (9..600).step_by(10) {
        assert!(store.get(&key(i)).expect("get").is_some(), "durable {i} moved by reclamation, then lost");
    }
}

#[test]
fn damaged_index_file_means_a_scan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 16);
    let (store, _) = open(&c, b"T");
    let mut model = Model::new();
    fill(&store, &mut model, 0, 1000, 0);
    store.close(b"T").expect("close");
    let index = dir.path().join("flash.tier.index");
    let f = std::fs::OpenOptions::new().write(true).open(&index).expect("index");
    f.write_all_at(&[0xEE], 100).expect("damage");
    drop(f);
    let (store, report) = open(&c, b"T");
    assert_eq!((report.warm, report.token_matched), (Warm::FromScan, false));
    check_exact(&store, &model);
}

#[test]
fn torn_tail_is_never_returned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 16);
    let (store, _) = open(&c, b"T");
    let mut model = Model::new();
    for i in 0..50u64 {
        let v = value(i, 0, 500);
        store.insert(&key(i), &v, Retention::Durable).expect("insert");
        model.insert(key(i), (v, Retention::Durable));
    }
    drop(store);
    // Tear the last record: zero its second half.
    let bytes = std::fs::read(&c.path).expect("read");
    let last = value(49, 0, 500);
    let at = bytes.windows(last.len()).rposition(|w| w == last.as_slice()).expect("on disk");
    let f = std::fs::OpenOptions::new().write(true).open(&c.path).expect("open");
    f.write_all_at(&[0u8; 250], (at + 250) as u64).expect("tear");
    drop(f);
    let (store, report) = open(&c, b"T");
    assert_eq!(report.warm, Warm::FromScan);
    assert_eq!(store.get(&key(49)).expect("get"), None);
    model.remove(&key(49));
    check_exact(&store, &model);
    // The store goes on writing after the torn record.
    store.insert(&key(49), b"again", Retention::Durable).expect("insert");
    drop(store);
    let (store, _) = open(&c, b"T");
    assert_eq!(store.get(&key(49)).expect("get"), Some((b"again".to_vec(), Retention::Durable)));
}

#[test]
fn recovery_grows_an_index_planned_too_small() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 32);
    let (store, _) = open(&c, b"T");
    let mut model = Model::new();
    for i in 0..4000u64 {
        let v = value(i, 0, 60);
        // Keep records, made durable by the Durable insert at the end (it
        // writes the whole tail before it).
        let r = if i == 3999 { Retention::Durable } else { Retention::Keep };
        store.insert(&key(i), &v, r).expect("insert");
        model.insert(key(i), (v, r));
    }
    drop(store);
    // Reopened planning for 4 KiB records: 512 slots for 4000 records.
    let c2 = TierConfig { mean_record_bytes: 4096, ..c.clone() };
    let (store, report) = open(&c2, b"T");
    assert_eq!(report.records, 4000);
    check_exact(&store, &model);
    store.close(b"T").expect("close");
    let (store, report) = open(&c2, b"T");
    assert_eq!(report.warm, Warm::FromIndex);
    check_exact(&store, &model);
}

#[test]
fn reopen_with_a_larger_size_grows_and_a_smaller_shrinks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 16);
    let (store, _) = open(&c, b"T");
    let mut model = Model::new();
    for i in 0..500u64 {
        let v = value(i, 0, 100);
        store.insert(&key(i), &v, Retention::Durable).expect("insert");
        model.insert(key(i), (v, Retention::Durable));
    }
    store.close(b"T").expect("close");
    let (store, report) = open(&config(dir.path(), 24), b"T");
    assert_eq!((report.warm, store.stats().regions), (Warm::FromIndex, 24));
    check_exact(&store, &model);
    store.close(b"T").expect("close");
    let (store, _) = open(&config(dir.path(), 8), b"T");
    assert_eq!(store.stats().regions, 8);
    check_exact(&store, &model);
}

/// Rewrites the format version of the superblock and of every region header
/// in the file at `path`, checksums included (what a version-1 build wrote).
fn set_format_version(path: &std::path::Path, regions: u64, region_size: u64, version: u32) {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).expect("open the file");
    let patch = |at: u64, crc_at: usize| {
        let mut block = vec![0u8; 64];
        file.read_exact_at(&mut block, at).expect("read a header");
        if block.iter().all(|&b| b == 0) {
            return;
        }
        block[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = crc32c::crc32c(&block[..crc_at]);
        block[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
        file.write_all_at(&block, at).expect("write a header");
    };
    patch(0, 24);
    for r in 0..regions {
        patch(4096 + r * region_size, 60);
    }
    file.sync_all().expect("sync");
}

fn superblock_version(path: &std::path::Path) -> u32 {
    let bytes = std::fs::read(path).expect("read the file");
    u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"))
}

#[test]
fn a_version_1_file_is_read_and_marked_version_2_and_a_newer_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 16);
    let (store, _) = open(&c, b"T1");
    let mut model = Model::new();
    fill(&store, &mut model, 0, 500, 0);
    store.close(b"T1").expect("close");
    set_format_version(&c.path, 16, u64::from(c.region_size), 1);
    assert_eq!(superblock_version(&c.path), 1);
    let (store, report) = open(&c, b"T1");
    assert_eq!(report.warm, Warm::FromIndex, "a version-1 file's checkpoint is used as it is");
    check_exact(&store, &model);
    store.close(b"T1").expect("close");
    assert_eq!(superblock_version(&c.path), 2, "a version-1 build must refuse the file from now on");
    // Version-1 regions are scanned as well as version-2 ones.
    let (store, report) = open(&c, b"other token");
    assert_eq!(report.warm, Warm::FromScan);
    check_exact(&store, &model);
    store.close(b"T1").expect("close");
    set_format_version(&c.path, 16, u64::from(c.region_size), 3);
    match FlashStore::open(&c, b"T1") {
        Err(pgtier_tier::TierError::Format(reason)) => assert!(reason.contains("format version 3"), "{reason}"),
        Err(other) => panic!("a version-3 file gave {other}"),
        Ok(_) => panic!("a version-3 file was opened"),
    }
}
