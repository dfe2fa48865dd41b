//! Measures a warm restart: fills a store with N records (8-byte keys,
//! 100-byte values: 128 bytes on flash each), closes it with a token,
//! drops the index file from the page cache, reopens with the token (from
//! the index checkpoint), then reopens with another token (a full scan) for
//! comparison. Prints times, bytes read and index bytes per record.
//!
//! cargo run --release -p pgtier-tier --example warm_restart -- [records] [dir]
//! With `PGTIER_WARM_DIR=<dir>` the store is kept there; `... -- open <records>`
//! then only reopens it (for profiling the open alone).

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

use pgtier_tier::{Admission, DirectIo, FlashStore, Inserted, Retention, TierConfig};

const VALUE_BYTES: usize = 100;
const RECORD_BYTES: u64 = 128;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let open_only = args.first().is_some_and(|a| a == "open");
    if open_only {
        args.remove(0);
    }
    let records: u64 = args.first().map(|a| a.parse()).transpose()?.unwrap_or(10_000_000);
    let temp = tempfile::tempdir_in(args.get(1).map_or("/tmp", String::as_str))?;
    let dir = std::env::var("PGTIER_WARM_DIR").map_or_else(|_| temp.path().to_path_buf(), Into::into);
    let config = config_for(&dir, records);
    if open_only {
        let t = Instant::now();
        let (_store, report) = FlashStore::open(&config, b"token")?;
        println!("open: {:.3} s {report:?}", t.elapsed().as_secs_f64());
        return Ok(());
    }
    let (store, _) = FlashStore::open(&config, b"first")?;
    println!("store: {} MiB, {:?}, {records} records of {RECORD_BYTES} bytes", config.size >> 20, store.io_mode());
    let started = Instant::now();
    fill(Arc::new(store), records)?;
    println!("fill: {:.1} s", started.elapsed().as_secs_f64());

    let (store, _) = FlashStore::open(&config, b"first")?;
    let s = store.stats();
    println!(
        "before close: {} records, index {} MiB = {:.2} bytes per record ({} slots of 8 bytes, {:.1}% full)",
        s.records,
        s.index_bytes >> 20,
        s.index_bytes as f64 / s.records as f64,
        s.index_bytes / 8,
        100.0 * s.records as f64 / (s.index_bytes / 8) as f64
    );
    let t = Instant::now();
    store.close(b"token")?;
    println!("close (checkpoint): {:.2} s", t.elapsed().as_secs_f64());
    drop_page_cache(&dir.join("warm.tier.index"))?;
    if std::env::var("PGTIER_WARM_DIR").is_ok() {
        return Ok(());
    }

    let t = Instant::now();
    let (store, report) = FlashStore::open(&config, b"token")?;
    let warm = t.elapsed();
    println!(
        "warm restart: {:.3} s ({:?}, clean {}, {} records, {} regions scanned, {} MiB read)",
        warm.as_secs_f64(),
        report.warm,
        report.clean,
        report.records,
        report.regions_scanned,
        report.bytes_read >> 20
    );
    assert_eq!(report.records, records, "every record back");
    spot_check(&store, records)?;
    random_reads(&store, records)?;
    drop(store);

    let t = Instant::now();
    let (store, report) = FlashStore::open(&config, b"another token")?;
    println!(
        "restart by scan: {:.2} s ({:?}, {} records, {} regions scanned, {} MiB read)",
        t.elapsed().as_secs_f64(),
        report.warm,
        report.records,
        report.regions_scanned,
        report.bytes_read >> 20
    );
    spot_check(&store, records)?;
    Ok(())
}

/// 16 MiB regions with room for every record plus 4% (the open region,
/// the reserve, region tails); the index planned for 128-byte records.
fn config_for(dir: &std::path::Path, records: u64) -> TierConfig {
    let region = 16u64 << 20;
    TierConfig {
        path: dir.join("warm.tier"),
        size: (records * RECORD_BYTES * 104 / 100).div_ceil(region).max(4) * region,
        region_size: region as u32,
        direct_io: DirectIo::Auto,
        mean_record_bytes: RECORD_BYTES as u32,
        admission: Admission::All,
    }
}

fn value(i: u64) -> [u8; VALUE_BYTES] {
    let mut v = [0u8; VALUE_BYTES];
    for (j, chunk) in v.chunks_mut(8).enumerate() {
        let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(j as u64).to_le_bytes();
        chunk.copy_from_slice(&x[..chunk.len()]);
    }
    v
}

/// Two threads insert; the store is closed as a crash would (no checkpoint)
/// except for a final Durable insert that makes everything before it durable.
fn fill(store: Arc<FlashStore>, records: u64) -> Result<(), Box<dyn std::error::Error>> {
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || -> Result<(), String> {
                for i in (t..records).step_by(2) {
                    let r = if i + 1 == records { Retention::Durable } else { Retention::Evictable };
                    match store.insert(&i.to_be_bytes(), &value(i), r).map_err(|e| e.to_string())? {
                        Inserted::Stored => {}
                        Inserted::Rejected(why) => return Err(format!("record {i} rejected: {why:?}")),
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "fill thread panicked")??;
    }
    let store = Arc::try_unwrap(store).map_err(|_| "store still shared")?;
    store.close(b"first")?;
    Ok(())
}

fn spot_check(store: &FlashStore, records: u64) -> Result<(), Box<dyn std::error::Error>> {
    for i in (0..records).step_by((records / 1000).max(1) as usize) {
        let got = store.get(&i.to_be_bytes())?.ok_or_else(|| format!("record {i} missing"))?;
        assert_eq!(got.0, value(i), "record {i}");
    }
    Ok(())
}

/// 100k gets of random records, one thread: the store's latency histogram.
fn random_reads(store: &FlashStore, records: u64) -> Result<(), Box<dyn std::error::Error>> {
    let before = store.stats();
    let mut x = 0x853c_49e6_748f_ea9b_u64;
    let n = 100_000;
    let t = Instant::now();
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        store.get(&(x % records).to_be_bytes())?.ok_or("a record missing")?;
    }
    let s = store.stats();
    let mut hist = s.clone();
    for (h, b) in hist.read_latency_us.iter_mut().zip(before.read_latency_us) {
        *h -= b;
    }
    println!(
        "random gets: {:.1} µs mean, p50 <= {:?} µs, p99 <= {:?} µs (log2 buckets), {:.2} device bytes read per get",
        t.elapsed().as_secs_f64() * 1e6 / n as f64,
        hist.read_latency_quantile_us(0.5).unwrap_or(0.0),
        hist.read_latency_quantile_us(0.99).unwrap_or(0.0),
        (s.device_bytes_read - before.device_bytes_read) as f64 / n as f64
    );
    Ok(())
}

/// The index file was just written: without this the restart would read it from memory.
fn drop_page_cache(path: &std::path::Path) -> std::io::Result<()> {
    let f = std::fs::File::open(path)?;
    f.sync_all()?;
    // SAFETY: posix_fadvise only reads its integer arguments; the descriptor is open.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Ok(())
}
