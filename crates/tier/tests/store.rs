//! The store's operations against their contracts.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{config, key, open, value};
use pgtier_tier::{
    Admission, DirectIo, FlashStore, Inserted, IoMode, RejectReason, Retention, TierConfig, TierError, Warm,
};

#[test]
fn insert_get_replace_remove_take() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, report) = open(&config(dir.path(), 16), b"t");
    assert_eq!(report.warm, Warm::Cold);
    assert_eq!(store.get(b"missing").expect("get"), None);
    assert_eq!(store.insert(b"a", b"one", Retention::Evictable).expect("insert"), Inserted::Stored);
    assert_eq!(store.get(b"a").expect("get"), Some((b"one".to_vec(), Retention::Evictable)));
    assert_eq!(store.insert(b"a", b"two", Retention::Keep).expect("insert"), Inserted::Stored);
    assert_eq!(store.get(b"a").expect("get"), Some((b"two".to_vec(), Retention::Keep)));
    assert!(store.contains(b"a") && !store.contains(b"b"));
    store.insert(b"", b"empty key", Retention::Durable).expect("insert");
    store.insert(b"empty value", b"", Retention::Evictable).expect("insert");
    assert_eq!(store.get(b"").expect("get"), Some((b"empty key".to_vec(), Retention::Durable)));
    assert_eq!(store.get(b"empty value").expect("get"), Some((Vec::new(), Retention::Evictable)));
    let s = store.stats();
    assert_eq!((s.records, s.durable_records, s.keep_records), (3, 1, 1));
    assert_eq!(store.take(b"a").expect("take"), Some((b"two".to_vec(), Retention::Keep)));
    assert_eq!(store.take(b"a").expect("take"), None);
    assert!(store.remove(b"").expect("remove"));
    assert!(!store.remove(b"").expect("remove"));
    let s = store.stats();
    assert_eq!((s.records, s.durable_records, s.keep_records, s.tombstones), (1, 0, 0, 1));
    assert!(s.live_bytes > 0 && s.index_bytes > 0 && s.hits >= 4 && s.misses >= 1);
}

#[test]
fn too_large_is_rejected_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 8), b"t");
    store.insert(b"k", b"small", Retention::Evictable).expect("insert");
    let big = vec![7u8; common::SMALL_REGION as usize];
    assert_eq!(
        store.insert(b"k", &big, Retention::Durable).expect("insert"),
        Inserted::Rejected(RejectReason::TooLarge)
    );
    assert_eq!(
        store.insert(&vec![1u8; 70_000], b"v", Retention::Evictable).expect("insert"),
        Inserted::Rejected(RejectReason::TooLarge)
    );
    assert_eq!(store.get(b"k").expect("get"), Some((b"small".to_vec(), Retention::Evictable)));
    // The largest record that fits does fit, again and again (regions switch).
    let fits = vec![9u8; common::SMALL_REGION as usize - 64 - 20 - 1];
    for _ in 0..12 {
        assert_eq!(store.insert(b"k", &fits, Retention::Evictable).expect("insert"), Inserted::Stored);
    }
    assert_eq!(store.get(b"k").expect("get").map(|(v, _)| v), Some(fits));
    assert_eq!(store.stats().rejected.too_large, 2);
}

#[test]
fn ring_wraps_fifo_drops_oldest_evictable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 8), b"t");
    let n = 4000u64; // ~ 4000 * 232 B = 0.9 MB through a 512 KiB store: several laps
    for i in 0..n {
        assert_eq!(store.insert(&key(i), &value(i, 0, 200), Retention::Evictable).expect("insert"), Inserted::Stored);
    }
    let s = store.stats();
    assert!(s.regions_reclaimed >= 8, "{s:?}");
    assert!(s.dropped_by_reclaim > 0 && s.free_regions >= 1, "{s:?}");
    // FIFO: what is left is a suffix of the insert order, and it is intact.
    let present: Vec<bool> = (0..n).map(|i| store.contains(&key(i))).collect();
    let first = present.iter().position(|&p| p).expect("something left");
    assert!(present[first..].iter().all(|&p| p), "not a suffix: FIFO order broken");
    assert!(first > 0 && (n - first as u64) > 1000, "kept {} of {n}", n - first as u64);
    for i in first as u64..n {
        assert_eq!(store.get(&key(i)).expect("get"), Some((value(i, 0, 200), Retention::Evictable)));
    }
    assert_eq!(s.records, n - first as u64);
}

#[test]
fn a_record_read_since_written_gets_one_second_chance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 8), b"t");
    let insert = |i: u64| {
        assert_eq!(store.insert(&key(i), &value(i, 0, 200), Retention::Evictable).expect("insert"), Inserted::Stored);
    };
    // Keys 0..100 lie in the first region; every tenth is read once.
    (0..100).for_each(insert);
    for i in (0..100).step_by(10) {
        assert!(store.get(&key(i)).expect("get").is_some());
    }
    let mut next = 100;
    while store.stats().regions_reclaimed == 0 {
        insert(next);
        next += 1;
    }
    // The first region is reclaimed: the read records were rewritten at the
    // head, the others dropped (`contains` does not count as a read).
    for i in 0..100 {
        assert_eq!(store.contains(&key(i)), i % 10 == 0, "key {i}");
    }
    assert_eq!(store.stats().reinserted_referenced, 10);
    for i in (0..100).step_by(10) {
        assert_eq!(store.get(&key(i)).expect("get"), Some((value(i, 0, 200), Retention::Evictable)));
    }
    // Read again after the rewrite (just above) earns another chance; not
    // read after that, a record goes with its region like any other.
    let lap = next + 3 * 4000;
    while next < lap {
        insert(next);
        next += 1;
    }
    let s = store.stats();
    assert_eq!(s.reinserted_referenced, 20, "{s:?}");
    assert!(s.regions_reclaimed > 16, "{s:?}");
    for i in (0..100).step_by(10) {
        assert!(!store.contains(&key(i)), "key {i} outlived two laps unread");
    }
}

#[test]
fn the_read_mark_stays_out_of_the_index_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 8);
    let (store, _) = open(&c, b"t");
    for i in 0..50 {
        store.insert(&key(i), &value(i, 0, 200), Retention::Evictable).expect("insert");
        assert!(store.get(&key(i)).expect("get").is_some());
    }
    store.close(b"t").expect("close");
    let (store, report) = open(&c, b"t");
    assert_eq!((report.warm, report.records), (Warm::FromIndex, 50));
    for i in 0..50 {
        assert_eq!(store.get(&key(i)).expect("get"), Some((value(i, 0, 200), Retention::Evictable)));
    }
}

#[test]
fn keep_and_durable_survive_churn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 16), b"t");
    for i in 0..50 {
        store.insert(&key(i), &value(i, 0, 300), Retention::Durable).expect("durable");
        store.insert(&key(1000 + i), &value(i, 1, 300), Retention::Keep).expect("keep");
    }
    for i in 0..20_000u64 {
        store.insert(&key(10_000 + i % 3000), &value(i, 2, 150), Retention::Evictable).expect("churn");
    }
    let s = store.stats();
    assert!(s.regions_reclaimed > 30 && s.compacted_durable >= 50 && s.reinserted_keep >= 50, "{s:?}");
    for i in 0..50 {
        assert_eq!(store.get(&key(i)).expect("get"), Some((value(i, 0, 300), Retention::Durable)));
        assert_eq!(store.get(&key(1000 + i)).expect("get"), Some((value(i, 1, 300), Retention::Keep)));
    }
    let wa = s.device_bytes_written as f64 / s.logical_bytes_written as f64;
    assert!(wa < 2.0, "write amplification {wa:.2} for mostly Evictable data");
}

#[test]
fn durable_beyond_capacity_is_full_not_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 8), b"t");
    let mut stored = 0u64;
    let err = loop {
        match store.insert(&key(stored), &value(stored, 0, 1000), Retention::Durable) {
            Ok(Inserted::Stored) => stored += 1,
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) => break e,
        }
        assert!(stored < 10_000, "never full");
    };
    assert!(matches!(err, TierError::Full(_)), "{err}");
    assert_eq!(err.sqlstate(), "53100");
    // Evictable inserts still get in (and get dropped); Durable ones stay.
    for i in 0..2000 {
        store.insert(&key(100_000 + i), &value(i, 1, 500), Retention::Evictable).expect("evictable");
    }
    for i in 0..stored {
        assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), Some(value(i, 0, 1000)), "durable {i}");
    }
    // Removing Durable records makes room again.
    for i in 0..stored / 2 {
        assert!(store.remove(&key(i)).expect("remove"));
    }
    store.insert(b"again", &value(1, 1, 1000), Retention::Durable).expect("room again");
}

#[test]
fn second_touch_admission() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path(), 8);
    c.admission = Admission::SecondTouch;
    let (store, _) = open(&c, b"t");
    assert_eq!(
        store.insert(b"k", b"v1", Retention::Evictable).expect("1st"),
        Inserted::Rejected(RejectReason::NotAdmitted)
    );
    assert_eq!(store.get(b"k").expect("get"), None);
    assert_eq!(store.insert(b"k", b"v2", Retention::Evictable).expect("2nd"), Inserted::Stored);
    assert_eq!(store.insert(b"k", b"v3", Retention::Keep).expect("on flash"), Inserted::Stored);
    assert_eq!(store.insert(b"d", b"v", Retention::Durable).expect("durable"), Inserted::Stored);
    let s = store.stats();
    assert_eq!((s.rejected.not_admitted, s.inserts), (1, 3));
    assert!(s.admission_bytes > 0);
}

#[test]
fn concurrent_takes_exactly_one_wins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 16), b"t");
    let store = Arc::new(store);
    for round in 0..200u64 {
        let retention = if round % 2 == 0 { Retention::Durable } else { Retention::Evictable };
        store.insert(&key(round), &value(round, 0, 64), retention).expect("insert");
        let winners = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (store, winners) = (Arc::clone(&store), Arc::clone(&winners));
                std::thread::spawn(move || {
                    if let Some((v, _)) = store.take(&key(round)).expect("take") {
                        assert_eq!(v, value(round, 0, 64));
                        winners.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().expect("join"));
        assert_eq!(winners.load(Ordering::SeqCst), 1, "round {round}");
    }
}

#[test]
fn durable_inserts_share_syncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 64), b"t");
    let store = Arc::new(store);
    let before = store.stats().syncs;
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..100 {
                    let k = t * 1000 + i;
                    store.insert(&key(k), &value(k, 0, 100), Retention::Durable).expect("durable");
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("join"));
    let syncs = store.stats().syncs - before;
    assert!(syncs < 800, "{syncs} syncs for 800 Durable inserts: no group commit");
    assert_eq!(store.stats().durable_records, 800);
}

#[test]
fn corrupt_record_is_an_error_never_bytes() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 8);
    let (store, _) = open(&c, b"t");
    for i in 0..100 {
        store.insert(&key(i), &value(i, 0, 100), Retention::Durable).expect("insert");
    }
    store.close(b"t").expect("close");
    // Flip a byte inside record 50's value, found by its bytes in the file.
    let bytes = std::fs::read(&c.path).expect("read file");
    let needle = value(50, 0, 100);
    let at = bytes.windows(needle.len()).position(|w| w == needle.as_slice()).expect("record on disk");
    let file = std::fs::OpenOptions::new().write(true).open(&c.path).expect("open");
    file.write_all_at(&[bytes[at + 10] ^ 0x40], (at + 10) as u64).expect("flip");
    drop(file);
    let (store, report) = open(&c, b"t");
    assert_eq!(report.warm, Warm::FromIndex);
    let err = store.get(&key(50)).expect_err("corrupt");
    assert!(matches!(err, TierError::Corrupt(_)), "{err}");
    assert_eq!(store.get(&key(50)).expect("entry gone"), None);
    assert_eq!(store.stats().corrupt_records, 1);
    for i in (0..100).filter(|&i| i != 50) {
        assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), Some(value(i, 0, 100)));
    }
}

#[test]
fn reclamation_salvages_records_after_a_corrupt_one() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 16);
    let (store, _) = open(&c, b"t");
    // 100 records of ~330 bytes fill half of the first region.
    for i in 0..100 {
        store.insert(&key(i), &value(i, 0, 300), Retention::Durable).expect("insert");
    }
    store.close(b"t").expect("close");
    let bytes = std::fs::read(&c.path).expect("read file");
    let needle = value(10, 0, 300);
    let at = bytes.windows(needle.len()).position(|w| w == needle.as_slice()).expect("record on disk");
    let file = std::fs::OpenOptions::new().write(true).open(&c.path).expect("open");
    file.write_all_at(&[bytes[at + 5] ^ 1], (at + 5) as u64).expect("flip");
    drop(file);
    // From the index, the 89 records after the corrupt one are still known.
    let (store, report) = open(&c, b"t");
    assert_eq!((report.warm, report.records), (Warm::FromIndex, 100));
    assert!(store.debug_reclaim_oldest().expect("reclaim"));
    let s = store.stats();
    assert_eq!((s.corrupt_records, s.durable_corrupt_records, s.durable_records), (1, 1, 99), "{s:?}");
    assert_eq!(store.get(&key(10)).expect("gone"), None);
    for i in (0..100).filter(|&i| i != 10) {
        assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), Some(value(i, 0, 300)), "durable {i}");
    }
    drop(store);
    let (store, _) = open(&c, b"t");
    assert_eq!(store.stats().durable_records, 99);
}

#[test]
fn io_error_fails_the_store_and_reopen_recovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 8);
    let (store, _) = open(&c, b"t");
    for i in 0..20 {
        store.insert(&key(i), &value(i, 0, 100), Retention::Durable).expect("insert");
    }
    store.insert(b"droppable", b"x", Retention::Evictable).expect("insert");
    store.debug_fail_io_after(0, 1);
    let err = store.insert(&key(99), &value(99, 0, 100), Retention::Durable).expect_err("sync fails");
    assert!(matches!(err, TierError::Io { .. }), "{err}");
    let s = store.stats();
    assert!(s.failed.is_some(), "{s:?}");
    assert_eq!(
        store.insert(b"k", b"v", Retention::Evictable).expect("insert"),
        Inserted::Rejected(RejectReason::Disabled)
    );
    // Reads still serve checked records; Durable removal cannot be made durable.
    assert_eq!(store.get(&key(3)).expect("get").map(|(v, _)| v), Some(value(3, 0, 100)));
    assert!(matches!(store.remove(&key(3)), Err(TierError::Failed(_))));
    assert!(store.remove(b"droppable").expect("droppable removal needs no write"));
    assert!(matches!(store.close(b"t"), Err(TierError::Failed(_))));
    let (store, report) = open(&c, b"t");
    assert_eq!(report.warm, Warm::FromScan);
    for i in 0..20 {
        assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), Some(value(i, 0, 100)), "acknowledged {i}");
    }
    assert!(store.stats().failed.is_none());
}

#[test]
fn io_error_inside_reclamation_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 8);
    let (store, _) = open(&c, b"t");
    for i in 0..200u64 {
        store.insert(&key(i), &value(i, 0, 300), Retention::Durable).expect("insert");
    }
    for i in 0..300u64 {
        store.insert(&key(1000 + i), &value(i, 1, 300), Retention::Evictable).expect("insert");
    }
    // The first device write of the reclamation (writing the moved copies
    // before they are synced) fails.
    store.debug_fail_io_after(1, 0);
    let err = store.debug_reclaim_oldest().expect_err("reclamation fails");
    assert!(matches!(err, TierError::Io { .. }), "{err}");
    assert!(store.stats().failed.is_some());
    for i in 0..200u64 {
        assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), Some(value(i, 0, 300)), "durable {i}");
    }
    drop(store);
    let (store, _) = open(&c, b"t");
    for i in 0..200u64 {
        assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), Some(value(i, 0, 300)), "durable {i}");
    }
}

#[test]
fn drop_droppable_and_drain_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 16), b"t");
    for i in 0..300u64 {
        let r = [Retention::Evictable, Retention::Keep, Retention::Durable][(i % 3) as usize];
        store.insert(&key(i), &value(i, 0, 80), r).expect("insert");
    }
    assert_eq!(store.drop_droppable(), 200);
    let s = store.stats();
    assert_eq!((s.records, s.durable_records, s.keep_records), (100, 100, 0));
    let mut seen = Vec::new();
    store
        .for_each_durable(|k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            true
        })
        .expect("drain");
    seen.sort();
    let mut want: Vec<_> = (0..300u64).filter(|i| i % 3 == 2).map(|i| (key(i), value(i, 0, 80))).collect();
    want.sort();
    assert_eq!(seen, want);
    let mut count = 0;
    store
        .for_each_durable(|_, _| {
            count += 1;
            count < 10
        })
        .expect("stop early");
    assert_eq!(count, 10);
    store.clear().expect("clear");
    let s = store.stats();
    assert_eq!((s.records, s.live_bytes), (0, 0));
    assert_eq!(store.get(&key(2)).expect("get"), None);
    store.insert(b"after", b"clear", Retention::Durable).expect("insert");
    store.close(b"t").expect("close");
    let (store, _) = open(&config(dir.path(), 16), b"t");
    assert_eq!(store.stats().records, 1);
    assert_eq!(store.get(&key(2)).expect("get"), None);
}

#[test]
fn resize_online_keeps_durable_and_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 16);
    let (store, _) = open(&c, b"t");
    for i in 0..3000u64 {
        let r = if i % 5 == 0 { Retention::Durable } else { Retention::Evictable };
        store.insert(&key(i), &value(i, 0, 150), r).expect("insert");
    }
    store.resize(32 * u64::from(common::SMALL_REGION)).expect("grow");
    assert_eq!(store.stats().regions, 32);
    assert_eq!(std::fs::metadata(&c.path).expect("meta").len(), 4096 + 32 * u64::from(common::SMALL_REGION));
    store.resize(6 * u64::from(common::SMALL_REGION)).expect("shrink");
    let s = store.stats();
    assert_eq!(s.regions, 6);
    assert_eq!(std::fs::metadata(&c.path).expect("meta").len(), 4096 + 6 * u64::from(common::SMALL_REGION));
    for i in (0..3000u64).step_by(5) {
        assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), Some(value(i, 0, 150)), "durable {i}");
    }
    let err = store.resize(4 * u64::from(common::SMALL_REGION)).expect_err("durable does not fit");
    assert!(matches!(err, TierError::Full(_)), "{err}");
    drop(store);
    // A crash (no close): the scan finds every Durable record in 6 regions.
    let (store, report) = open(&config(dir.path(), 6), b"t");
    assert_eq!(report.warm, Warm::FromScan);
    for i in (0..3000u64).step_by(5) {
        assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), Some(value(i, 0, 150)), "durable {i}");
    }
}

#[test]
fn a_shrink_keeps_the_newest_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 16), b"t");
    // A sequential fill: the regions past the new end are the newest.
    let mut i = 0u64;
    while store.stats().live_bytes < 12 * u64::from(common::SMALL_REGION) {
        store.insert(&key(i), &value(i, 0, 150), Retention::Evictable).expect("insert");
        i += 1;
    }
    let before = store.stats().records;
    store.resize(10 * u64::from(common::SMALL_REGION)).expect("shrink");
    let after = store.stats();
    assert_eq!(after.regions, 10);
    // Seven regions' worth stays (three are kept free and open), and they
    // are the newest, as a FIFO of ten would hold them: reclaiming in FIFO
    // order dropped every region (0 records left), retiring the regions
    // past the end dropped the newest.
    assert!(after.records * 2 >= before, "{} of {before} records left", after.records);
    assert!(after.kept_by_shrink > 0, "{after:?}");
    let found: Vec<u64> = (0..i).filter(|&k| store.get(&key(k)).expect("get").is_some()).collect();
    assert_eq!(found.len() as u64, after.records, "every record counted is found, and only those");
    assert_eq!(found.last(), Some(&(i - 1)), "the newest record stays");
    assert!(found[0] > 0, "the oldest record goes");
    // What stays leans to the newest keys (a rewrite finds no room at
    // times, so it is not one run of them).
    let mean = found.iter().sum::<u64>() / found.len() as u64;
    assert!(mean > i / 2, "kept keys average {mean} of 0..{i}");
}

#[test]
fn a_shrink_keeps_the_newest_durable_versions_across_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&config(dir.path(), 16), b"t");
    // Durable records in the oldest region, their removals (tombstones) and
    // newer versions later, in regions the shrink retires.
    for i in 0..400u64 {
        store.insert(&key(i), &value(i, 0, 150), Retention::Durable).expect("insert");
    }
    let mut filler = 1_000_000u64;
    while store.stats().live_bytes < 9 * u64::from(common::SMALL_REGION) {
        store.insert(&key(filler), &value(filler, 0, 150), Retention::Evictable).expect("filler");
        filler += 1;
    }
    for i in 0..400u64 {
        match i % 3 {
            0 => assert!(store.remove(&key(i)).expect("remove")),
            1 => store.insert(&key(i), &value(i, 1, 150), Retention::Durable).map(|_| ()).expect("update"),
            _ => {}
        }
    }
    let s = store.stats();
    let used = s.regions - s.free_regions;
    assert!(used > 9, "the removals went past the new end ({used} regions in use)");
    store.resize(8 * u64::from(common::SMALL_REGION)).expect("shrink");
    let check = |store: &FlashStore, when: &str| {
        for i in 0..400u64 {
            let want = match i % 3 {
                0 => None,
                1 => Some(value(i, 1, 150)),
                _ => Some(value(i, 0, 150)),
            };
            assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), want, "{when}: key {i}");
        }
    };
    check(&store, "after the shrink");
    drop(store);
    // A crash (no close): the scan replays the regions that stayed.
    let (store, report) = open(&config(dir.path(), 8), b"t");
    assert_eq!(report.warm, Warm::FromScan);
    check(&store, "after the crash");
}

#[test]
fn second_open_of_one_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = config(dir.path(), 8);
    let (_store, _) = open(&c, b"t");
    assert!(matches!(FlashStore::open(&c, b"t"), Err(TierError::Locked(_))));
}

/// A private ramfs mounted for one test (ramfs has no O_DIRECT), unmounted on drop.
struct RamfsMount(tempfile::TempDir);

impl RamfsMount {
    fn new() -> Option<RamfsMount> {
        let dir = tempfile::tempdir().ok()?;
        let target = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).ok()?;
        let fstype = c"ramfs";
        // SAFETY: every pointer is a valid NUL-terminated string for the call's duration.
        let rc = unsafe { libc::mount(fstype.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
        (rc == 0).then_some(RamfsMount(dir))
    }
}

impl Drop for RamfsMount {
    fn drop(&mut self) {
        if let Ok(target) = std::ffi::CString::new(self.0.path().as_os_str().as_encoded_bytes()) {
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

fn refuses_o_direct(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join(".pgtier-odirect-probe");
    let refused = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_err_and(|e| e.raw_os_error() == Some(libc::EINVAL));
    let _ = std::fs::remove_file(&probe);
    refused
}

/// Auto falls back to buffered I/O where the file system refuses O_DIRECT,
/// On fails there. tmpfs (/dev/shm) refuses it before Linux 6.6; later
/// kernels accept it, and then a private ramfs (or another refusing mount) is used.
#[test]
fn direct_io_refused_falls_back_in_auto_and_fails_in_on() {
    let shm = tempfile::tempdir_in("/dev/shm").ok().filter(|d| refuses_o_direct(d.path()));
    let mount = if shm.is_none() { RamfsMount::new() } else { None };
    let dir: Option<std::path::PathBuf> = shm
        .as_ref()
        .map(|d| d.path().to_path_buf())
        .or_else(|| mount.as_ref().map(|m| m.0.path().to_path_buf()))
        .filter(|d| refuses_o_direct(d));
    let Some(dir) = dir else {
        eprintln!("SKIPPED: /dev/shm accepts O_DIRECT on this kernel and no ramfs could be mounted (not root)");
        return;
    };
    eprintln!("a file system refusing O_DIRECT: {}", dir.display());
    let mut c = config(&dir, 8);
    c.direct_io = DirectIo::On;
    let err = FlashStore::open(&c, b"t").err().expect("On must fail where O_DIRECT is refused");
    assert!(matches!(err, TierError::DirectIoUnavailable(_)), "{err}");
    c.direct_io = DirectIo::Auto;
    let (store, report) = open(&c, b"t");
    assert!(
        matches!(&report.io_mode, IoMode::Buffered { reason } if reason.contains("O_DIRECT")),
        "{:?}",
        report.io_mode
    );
    assert_eq!(store.io_mode(), &report.io_mode);
    store.insert(b"k", b"v", Retention::Durable).expect("insert");
    assert_eq!(store.get(b"k").expect("get"), Some((b"v".to_vec(), Retention::Durable)));
    store.close(b"t").expect("close");
    let (store, report) = open(&c, b"t");
    assert_eq!((report.warm, store.get(b"k").expect("get").is_some()), (Warm::FromIndex, true));
}

/// Where the file system takes O_DIRECT (ext4 under /tmp here), Auto and On use it.
#[test]
fn direct_io_used_where_allowed() {
    let disk = tempfile::tempdir().expect("tempdir");
    if refuses_o_direct(disk.path()) {
        eprintln!("SKIPPED: {} refuses O_DIRECT", disk.path().display());
        return;
    }
    let mut c = config(disk.path(), 32);
    c.direct_io = DirectIo::On;
    let (store, report) = open(&c, b"t");
    assert_eq!(report.io_mode, IoMode::Direct);
    // Records crossing 4 KiB blocks read back through aligned reads.
    for i in 0..200u64 {
        store.insert(&key(i), &value(i, 0, 3000 + i as usize), Retention::Durable).expect("insert");
    }
    drop(store);
    let (store, _) = open(&c, b"t");
    for i in 0..200u64 {
        assert_eq!(store.get(&key(i)).expect("get").map(|(v, _)| v), Some(value(i, 0, 3000 + i as usize)));
    }
    c.direct_io = DirectIo::Off;
    drop(store);
    let (_, report) = open(&c, b"t");
    assert!(matches!(report.io_mode, IoMode::Buffered { .. }));
}

#[test]
fn config_is_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = TierConfig::new(dir.path().join("f"), 3 << 16);
    c.region_size = 1 << 16;
    assert!(matches!(FlashStore::open(&c, b""), Err(TierError::Config(_))));
    c.size = 4 << 16;
    c.region_size = (1 << 16) + 512;
    assert!(matches!(FlashStore::open(&c, b""), Err(TierError::Config(_))));
    std::fs::write(dir.path().join("other"), b"someone else's data").expect("write");
    let mut c = config(dir.path(), 8);
    c.path = dir.path().join("other");
    assert!(matches!(FlashStore::open(&c, b""), Err(TierError::Format(_))));
}

/// Durable records inserted deferred reach stable storage with one sync,
/// which writes the tail once for all of them (not a block per record),
/// and a reopen without a clean close (a crash's) finds every one.
#[test]
fn deferred_durable_inserts_share_one_sync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path(), 64);
    let (store, _) = open(&cfg, b"t");
    let synced_bytes = {
        let before = store.stats();
        for k in 0..50 {
            store.insert(&key(k), &value(k, 0, 200), Retention::Durable).expect("durable");
        }
        store.stats().device_bytes_written - before.device_bytes_written
    };
    let before = store.stats();
    for k in 50..100 {
        assert_eq!(
            store.insert_deferred(&key(k), &value(k, 0, 200), Retention::Durable).expect("deferred"),
            Inserted::Stored
        );
    }
    assert_eq!(store.stats().syncs, before.syncs, "a deferred insert does not sync");
    store.sync().expect("sync");
    let after = store.stats();
    assert_eq!(after.syncs - before.syncs, 1);
    let deferred_bytes = after.device_bytes_written - before.device_bytes_written;
    assert!(
        deferred_bytes * 5 < synced_bytes,
        "50 deferred records wrote {deferred_bytes} bytes, 50 synced ones {synced_bytes}"
    );
    drop(store);
    let (store, _) = open(&cfg, b"t");
    for k in 0..100 {
        assert_eq!(store.get(&key(k)).expect("get"), Some((value(k, 0, 200), Retention::Durable)), "{k}");
    }
}
