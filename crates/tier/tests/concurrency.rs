//! Readers, writers, takers, reclamation and checkpoints at once on a tiny
//! store: a read never returns bytes that are not a value written for the
//! key (a region reused under a reader would show here), Durable records
//! are never missing, and two takes never both get a record.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::{config, key, value, version_of};
use pgtier_tier::{Inserted, Retention, TierError};

const WRITERS: u64 = 2;
const KEYS: u64 = 400;

#[test]
fn concurrent_readers_writers_and_reclamation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = common::open(&config(dir.path(), 12), b"T");
    let store = Arc::new(store);
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    // Writers: key k belongs to writer k % WRITERS; keys k % 16 == 0 are
    // Durable and only their writer reads them, so it knows the last value.
    for w in 0..WRITERS {
        let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            let mut durable_last = std::collections::HashMap::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let k = w + WRITERS * (i.wrapping_mul(0x9e37_79b9) % (KEYS / WRITERS));
                let r = if k.is_multiple_of(16) {
                    Retention::Durable
                } else if k.is_multiple_of(3) {
                    Retention::Keep
                } else {
                    Retention::Evictable
                };
                let v = value(k, i, 50 + (i % 900) as usize);
                match store.insert(&key(k), &v, r) {
                    Ok(Inserted::Stored) if r == Retention::Durable => {
                        durable_last.insert(k, v);
                    }
                    Ok(_) | Err(TierError::Full(_)) => {}
                    Err(e) => panic!("insert: {e}"),
                }
                if i.is_multiple_of(50) {
                    for (k, v) in &durable_last {
                        let got = store.get(&key(*k)).expect("get").map(|(v, _)| v);
                        assert_eq!(got.as_ref(), Some(v), "writer {w}: Durable key {k}");
                    }
                }
            }
            durable_last.len()
        }));
    }
    // Readers and takers: any value they see must be a real version of the key.
    for t in 0..3u64 {
        let (store, stop, reads) = (Arc::clone(&store), Arc::clone(&stop), Arc::clone(&reads));
        threads.push(std::thread::spawn(move || {
            let mut x = t + 1;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = x % KEYS;
                let got = if t == 2 && !k.is_multiple_of(16) { store.take(&key(k)) } else { store.get(&key(k)) };
                if let Some((v, _)) = got.expect("read") {
                    assert!(version_of(k, &v).is_some(), "key {k}: bytes never written for it");
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
            0
        }));
    }
    let (ckpt, stop2) = (Arc::clone(&store), Arc::clone(&stop));
    threads.push(std::thread::spawn(move || {
        while !stop2.load(Ordering::Relaxed) {
            ckpt.checkpoint(b"T").expect("checkpoint");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        0
    }));
    // Run until reclamation went round the 12 regions a few times (bounded).
    let started = std::time::Instant::now();
    while store.stats().regions_reclaimed < 40 && started.elapsed() < std::time::Duration::from_secs(15) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let durable: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
    let s = store.stats();
    eprintln!(
        "{} reads, {} inserts, {} regions reclaimed, {durable} Durable keys",
        reads.load(Ordering::Relaxed),
        s.inserts,
        s.regions_reclaimed
    );
    assert!(s.regions_reclaimed >= 24 && reads.load(Ordering::Relaxed) > 1000, "{s:?}");
    assert_eq!(s.durable_records as usize, durable);
    assert!(s.failed.is_none() && s.corrupt_records == 0, "{s:?}");
}
