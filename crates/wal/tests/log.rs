//! Functional tests: round trips, segment rollover, reopen, concurrency,
//! tailing readers, truncation, backpressure.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{SEGMENT_BYTES, open_small, payload, read_all, segment_files, small_config};
use pgtier_wal::{Lsn, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES, Wal, WalError, WalOpenOptions};
use proptest::prelude::*;

#[test]
fn empty_log_first_record_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open_small(dir.path());
    assert_eq!(wal.end(), Lsn(SEGMENT_HEADER_BYTES));
    assert_eq!(wal.durable_end(), wal.end());
    assert!(read_all(&wal).is_empty());
    let a = wal.append(b"hello").expect("append");
    let b = wal.append(b"").expect("append");
    assert_eq!(a, Lsn(SEGMENT_HEADER_BYTES));
    assert_eq!(b.0, a.0 + RECORD_HEADER_BYTES + 8);
    wal.wait_durable(b).expect("durable");
    assert!(wal.durable_end() > b);
    assert_eq!(read_all(&wal), vec![(a.0, b"hello".to_vec()), (b.0, vec![])]);
    wal.close().expect("close");
    let wal = open_small(dir.path());
    assert_eq!(read_all(&wal), vec![(a.0, b"hello".to_vec()), (b.0, vec![])]);
    assert_eq!(wal.stats().recovery_records, 2);
    assert_eq!(wal.stats().recovery_cut_lsn, None);
}

#[test]
fn second_open_of_same_dir_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _wal = open_small(dir.path());
    assert!(matches!(Wal::open(dir.path(), small_config()), Err(WalError::Io(_))));
}

#[test]
fn record_limits_and_config_validation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open_small(dir.path());
    let max = small_config().record_bytes_max;
    assert!(wal.append(&vec![7u8; max]).is_ok());
    assert!(matches!(wal.append(&vec![7u8; max + 1]), Err(WalError::RecordTooLarge { .. })));
    drop(wal);
    let mut bad = small_config();
    bad.record_bytes_max = SEGMENT_BYTES as usize;
    let dir2 = tempfile::tempdir().expect("tempdir");
    assert!(Wal::open(dir2.path(), bad).is_err());
}

#[test]
fn async_mode_flushes_without_waiters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open_small(dir.path());
    let lsn = wal.append(b"async").expect("append");
    // No wait_durable: the writer must flush within async_flush_interval.
    let end = wal.wait_for_durable_beyond(lsn, Duration::from_secs(5));
    assert!(end > lsn);
}

#[test]
fn rollover_pads_and_reads_across_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open_small(dir.path());
    let mut expect = Vec::new();
    for i in 0..200u64 {
        let p = payload(i, 1000 + (i as usize * 37) % 3000);
        expect.push((wal.append(&p).expect("append").0, p));
    }
    wal.wait_durable(Lsn(expect.last().expect("some").0)).expect("durable");
    for w in expect.windows(2) {
        assert!(w[0].0 < w[1].0);
        // Records never span a segment boundary.
        let seg = |lsn: u64| lsn / SEGMENT_BYTES;
        assert_eq!(seg(w[0].0), seg(w[0].0 + RECORD_HEADER_BYTES + w[0].1.len() as u64 - 1));
    }
    assert_eq!(read_all(&wal), expect);
    assert!(wal.stats().segments_created > 5);
    drop(wal);
    let wal = open_small(dir.path());
    assert_eq!(read_all(&wal), expect);
    // Reading from the middle: exact record LSNs and in-between positions.
    let mid = expect[100].0;
    let got: Vec<_> = wal.read_from(Lsn(mid)).expect("reader").map(|r| r.expect("ok").0.0).collect();
    assert_eq!(got, expect[100..].iter().map(|e| e.0).collect::<Vec<_>>());
    let got: Vec<_> = wal.read_from(Lsn(mid + 1)).expect("reader").map(|r| r.expect("ok").0.0).collect();
    assert_eq!(got, expect[101..].iter().map(|e| e.0).collect::<Vec<_>>());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn round_trip_with_reopens(sizes in proptest::collection::vec(
        prop_oneof![0usize..300, 300usize..5000, 12_000usize..=16 << 10], 1..120),
        reopen_every in 10usize..60,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut wal = open_small(dir.path());
        let mut expect = Vec::new();
        for (i, &len) in sizes.iter().enumerate() {
            let p = payload(i as u64, len);
            let lsn = wal.append(&p).expect("append");
            if let Some(last) = expect.last() {
                let (prev, _): &(u64, Vec<u8>) = last;
                prop_assert!(lsn.0 > *prev);
            }
            expect.push((lsn.0, p));
            if i % reopen_every == reopen_every - 1 {
                wal.wait_durable(lsn).expect("durable");
                drop(wal);
                wal = open_small(dir.path());
                prop_assert_eq!(wal.durable_end(), wal.end());
            }
        }
        // Drop flushes what was appended but not waited for.
        drop(wal);
        let wal = open_small(dir.path());
        prop_assert_eq!(read_all(&wal), expect.clone());
        // read_from(any position) = exactly the records at or after it.
        let end = wal.end().0;
        for from in [0, end / 3, end / 2 + 1, end.saturating_sub(1), end, end + 100] {
            let got: Vec<u64> = wal.read_from(Lsn(from)).expect("reader").map(|r| r.expect("ok").0.0).collect();
            let want: Vec<u64> = expect.iter().map(|e| e.0).filter(|&l| l >= from).collect();
            prop_assert_eq!(got, want, "from {}", from);
        }
    }
}

#[test]
fn concurrent_committers_durable_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Arc::new(open_small(dir.path()));
    let threads = 16u64;
    let per_thread = 300u64;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..per_thread {
                    let seed = t << 32 | i;
                    let lsn = wal.append(&payload(seed, 50 + (seed as usize % 200))).expect("append");
                    wal.wait_durable(lsn).expect("durable");
                    // Durability of a record implies durability of everything before it.
                    assert!(wal.durable_end() > lsn);
                    mine.push((lsn.0, seed));
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<(u64, u64)> = handles.into_iter().flat_map(|h| h.join().expect("join")).collect();
    all.sort();
    let got = read_all(&wal);
    assert_eq!(got.len(), all.len());
    for ((lsn, seed), (glsn, gp)) in all.iter().zip(&got) {
        assert_eq!(lsn, glsn);
        assert_eq!(gp, &payload(*seed, 50 + (*seed as usize % 200)));
    }
    let stats = wal.stats();
    assert_eq!(stats.records_appended, threads * per_thread);
    // Group commit: fewer flushes than commits.
    assert!(stats.flushes < stats.records_appended, "{stats:?}");
}

#[test]
fn reader_tails_live_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Arc::new(open_small(dir.path()));
    let total = 2000u64;
    let writer = {
        let wal = Arc::clone(&wal);
        std::thread::spawn(move || {
            for i in 0..total {
                let lsn = wal.append(&payload(i, 100 + i as usize % 500)).expect("append");
                if i % 7 == 0 {
                    wal.wait_durable(lsn).expect("durable");
                }
            }
        })
    };
    let mut reader = wal.read_from(Lsn(0)).expect("reader");
    let mut seen = 0u64;
    let mut last = Lsn(0);
    while seen < total {
        match reader.next() {
            Some(rec) => {
                let (lsn, p) = rec.expect("record");
                assert!(lsn > last || seen == 0);
                assert!(lsn < wal.durable_end(), "reader returned a non-durable record");
                assert_eq!(p, payload(seen, 100 + seen as usize % 500));
                last = lsn;
                seen += 1;
            }
            None => {
                wal.wait_for_durable_beyond(reader.position(), Duration::from_millis(50));
            }
        }
    }
    writer.join().expect("join");
}

#[test]
fn truncate_before_keeps_needed_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open_small(dir.path());
    let mut lsns = Vec::new();
    for i in 0..300u64 {
        lsns.push(wal.append(&payload(i, 900)).expect("append"));
    }
    wal.wait_durable(*lsns.last().expect("some")).expect("durable");
    let keep_from = lsns[150];
    let files_before = segment_files(dir.path()).len();
    wal.truncate_before(keep_from).expect("truncate");
    let files_after = segment_files(dir.path());
    assert!(files_after.len() < files_before);
    assert!(files_after[0].0 <= keep_from.0, "segment holding keep_from was deleted");
    let got: Vec<_> = wal.read_from(keep_from).expect("reader").map(|r| r.expect("ok").0).collect();
    assert_eq!(got, lsns[150..].to_vec());
    // Lsn(0) reads from the oldest record.
    let first = wal.read_from(Lsn(0)).expect("reader").next().expect("some").expect("ok").0;
    assert_eq!(first, wal.stats().oldest_lsn);
    assert!(first <= keep_from);
    // Any other position in a deleted segment is refused, not skipped over.
    let gone = lsns[1];
    assert!(gone < first, "the first segment was not deleted");
    match wal.read_from(gone) {
        Err(pgtier_wal::WalError::Truncated { from, oldest }) => assert_eq!((from, oldest.0 <= first.0), (gone, true)),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("read from {gone:?}, a deleted segment"),
    }
    // Truncating everything never deletes the segment being written.
    wal.truncate_before(Lsn(u64::MAX)).expect("truncate");
    assert!(!segment_files(dir.path()).is_empty());
    let lsn = wal.append(b"after").expect("append");
    wal.wait_durable(lsn).expect("durable");
    drop(wal);
    let wal = open_small(dir.path());
    let all = read_all(&wal);
    assert_eq!(all.last().expect("some"), &(lsn.0, b"after".to_vec()));
}

#[test]
fn backpressure_bounds_the_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = WalOpenOptions { buffer_bytes_max: 8192, ..WalOpenOptions::default() };
    let wal = Arc::new(Wal::open_with(dir.path(), small_config(), options).expect("open"));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let wal = Arc::clone(&wal);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) && n < 3000 {
                    wal.append(&payload(t * 10_000 + n, 1000)).expect("append");
                    n += 1;
                }
                n
            })
        })
        .collect();
    let n: u64 = handles.into_iter().map(|h| h.join().expect("join")).sum();
    stop.store(true, Ordering::Relaxed);
    let stats = wal.stats();
    assert_eq!(stats.records_appended, n);
    assert!(stats.backpressure_waits > 0, "{stats:?}");
    let wal = Arc::into_inner(wal).expect("sole owner");
    wal.close().expect("close");
    let wal = open_small(dir.path());
    assert_eq!(read_all(&wal).len() as u64, n);
}

#[test]
fn wait_for_durable_beyond_times_out_without_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open_small(dir.path());
    let end = wal.durable_end();
    let t = std::time::Instant::now();
    assert_eq!(wal.wait_for_durable_beyond(end, Duration::from_millis(30)), end);
    assert!(t.elapsed() >= Duration::from_millis(30));
}

#[test]
fn record_larger_than_buffer_bound_goes_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = WalOpenOptions { buffer_bytes_max: 4096, ..WalOpenOptions::default() };
    let wal = Wal::open_with(dir.path(), small_config(), options).expect("open");
    let big = payload(1, 16 << 10);
    let a = wal.append(b"small").expect("append");
    let b = wal.append(&big).expect("append");
    let c = wal.append(b"after").expect("append");
    wal.wait_durable(c).expect("durable");
    assert_eq!(read_all(&wal), vec![(a.0, b"small".to_vec()), (b.0, big), (c.0, b"after".to_vec())]);
}

#[test]
fn lagging_reader_reports_removed_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open_small(dir.path());
    let mut last = Lsn(0);
    for i in 0..200u64 {
        last = wal.append(&payload(i, 1500)).expect("append");
    }
    wal.wait_durable(last).expect("durable");
    let mut reader = wal.read_from(Lsn(0)).expect("reader");
    let first = reader.next().expect("some").expect("ok");
    // The reader keeps its current segment open; the next ones are gone.
    wal.truncate_before(last).expect("truncate");
    let rest: Vec<_> = reader.by_ref().collect();
    assert!(rest.iter().any(|r| matches!(r, Err(WalError::Corrupt { .. }))), "first {:?}", first.0);
    assert!(reader.next().is_none(), "reader stays finished after an error");
}

#[test]
fn sequential_committers_never_lose_a_wakeup() {
    // Each commit finds the writer idle: exercises the idle/wanted handshake
    // between wait_durable and the writer thousands of times. A lost wake-up
    // hangs here (the async interval is long on purpose so it cannot mask one).
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = small_config();
    config.async_flush_interval = Duration::from_secs(3600);
    let wal = Arc::new(Wal::open(dir.path(), config).expect("open"));
    let handles: Vec<_> = (0..2u64)
        .map(|t| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                for i in 0..800u64 {
                    let lsn = wal.append(&payload(t << 32 | i, 64)).expect("append");
                    wal.wait_durable(lsn).expect("durable");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("join");
    }
    assert_eq!(wal.stats().records_appended, 1600);
}

#[test]
fn segment_size_change_between_opens() {
    // Existing segments keep the size in their header; new ones use the config.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut expect = Vec::new();
    for (round, segment_bytes) in [(0u64, 64u64 << 10), (1, 128 << 10), (2, 32 << 10)] {
        let mut config = small_config();
        config.segment_bytes = segment_bytes;
        let wal = Wal::open(dir.path(), config).expect("open");
        assert_eq!(read_all(&wal), expect);
        for i in 0..120u64 {
            let p = payload(round << 32 | i, 700 + (i as usize * 31) % 900);
            expect.push((wal.append(&p).expect("append").0, p));
        }
        wal.close().expect("close");
    }
    let wal = open_small(dir.path());
    assert_eq!(read_all(&wal), expect);
}

#[test]
fn truncated_segments_are_recycled_safely() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = open_small(dir.path());
    let mut expect = Vec::new();
    for round in 0..12u64 {
        for i in 0..40u64 {
            let p = payload(round << 32 | i, 700 + (i as usize * 53) % 1500);
            expect.push((wal.append(&p).expect("append").0, p));
        }
        let last = Lsn(expect.last().expect("some").0);
        wal.wait_durable(last).expect("durable");
        // Keep roughly the last segment's worth of records.
        wal.truncate_before(Lsn(last.0.saturating_sub(SEGMENT_BYTES))).expect("truncate");
    }
    let stats = wal.stats();
    assert!(stats.segments_recycled > 0, "{stats:?}");
    let oldest = stats.oldest_lsn.0;
    let kept: Vec<_> = expect.iter().filter(|e| e.0 >= oldest).cloned().collect();
    assert_eq!(read_all(&wal), kept);
    drop(wal);
    // Stale records from the segments' earlier lives must not confuse
    // recovery: the clean end is not reported as a cut, nothing extra appears.
    let wal = open_small(dir.path());
    assert_eq!(wal.stats().recovery_cut_lsn, None);
    assert_eq!(read_all(&wal), kept);
    let spares = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".wal.spare")))
        .count();
    assert!(spares <= 2, "spares are bounded: {spares}");
}

#[test]
fn last_record_and_record_checksums_identify_a_history() {
    let (dir_a, dir_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let (a, b) = (open_small(dir_a.path()), open_small(dir_b.path()));
    assert_eq!(a.last_record().expect("last"), None);
    // Two logs alike for 300 records (several segments), then one record
    // each of the same length that differs.
    let mut lsns = Vec::new();
    for i in 0..300u64 {
        let at = a.append(&payload(i, 900)).expect("append");
        assert_eq!(b.append(&payload(i, 900)).expect("append"), at);
        lsns.push(at);
    }
    let fork_a = a.append(b"history a").expect("append");
    let fork_b = b.append(b"history b").expect("append");
    assert_eq!(fork_a, fork_b);
    a.wait_durable(fork_a).expect("durable");
    b.wait_durable(fork_b).expect("durable");
    let (last_a, sum_a) = a.last_record().expect("last").expect("some");
    let (last_b, sum_b) = b.last_record().expect("last").expect("some");
    assert_eq!((last_a, last_b), (fork_a, fork_b));
    assert_ne!(sum_a, sum_b, "different records, one checksum");
    assert_eq!(a.record_checksum_at(fork_a).expect("read"), Some(sum_a));
    assert_eq!(b.record_checksum_at(fork_a).expect("read"), Some(sum_b));
    // The shared prefix checks equal; a position inside a record is none.
    let shared = lsns[299];
    assert_eq!(a.record_checksum_at(shared).expect("read"), b.record_checksum_at(shared).expect("read"));
    assert!(a.record_checksum_at(shared).expect("read").is_some());
    assert_eq!(a.record_checksum_at(Lsn(shared.0 + 8)).expect("read"), None);
    // After the last record a new segment may begin empty: still the last record.
    a.truncate_before(lsns[200]).expect("truncate");
    assert_eq!(a.last_record().expect("last"), Some((fork_a, sum_a)));
}
