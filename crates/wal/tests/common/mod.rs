//! Shared test helpers: a file system that fails on demand, small configs,
//! deterministic payloads.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgtier_wal::{DirLock, FileSystem, StdFileSystem, Wal, WalConfig, WalFile, WalOpenOptions};

pub const SEGMENT_BYTES: u64 = 64 << 10;

pub fn small_config() -> WalConfig {
    WalConfig {
        segment_bytes: SEGMENT_BYTES,
        async_flush_interval: Duration::from_millis(2),
        record_bytes_max: 16 << 10,
        ..WalConfig::default()
    }
}

pub fn open_small(dir: &Path) -> Wal {
    Wal::open(dir, small_config()).expect("open")
}

/// Payload derived from a seed so any reader can check it independently.
pub fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn read_all(wal: &Wal) -> Vec<(u64, Vec<u8>)> {
    wal.read_from(pgtier_wal::Lsn(0))
        .expect("reader")
        .map(|r| {
            let (lsn, p) = r.expect("record");
            (lsn.0, p)
        })
        .collect()
}

/// Segment files (by start LSN) in `dir`.
pub fn segment_files(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            let digits = name.strip_suffix(".wal")?;
            Some((digits.parse().ok()?, e.path()))
        })
        .collect();
    v.sort();
    v
}

/// Fault plan: counts down over record writes and syncs of segment files
/// (temporary files being preallocated are left alone, so faults hit the
/// commit path). `u64::MAX` = never.
#[derive(Debug)]
pub struct Faults {
    /// Fail the write at which this countdown reaches zero.
    pub fail_write_after: AtomicU64,
    /// Fail the `sync_data` at which this reaches zero.
    pub fail_sync_after: AtomicU64,
    /// Make the write at which this reaches zero write only half its bytes
    /// and then fail the following write attempt (a torn write).
    pub short_write_after: AtomicU64,
    pub writes: AtomicU64,
    pub syncs: AtomicU64,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            fail_write_after: AtomicU64::new(u64::MAX),
            fail_sync_after: AtomicU64::new(u64::MAX),
            short_write_after: AtomicU64::new(u64::MAX),
            writes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        }
    }
}

/// Decrements a countdown; true exactly when it hits zero.
fn fires(countdown: &AtomicU64) -> bool {
    let mut cur = countdown.load(Ordering::SeqCst);
    loop {
        if cur == u64::MAX || cur == 0 {
            return false;
        }
        match countdown.compare_exchange(cur, cur - 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return cur == 1,
            Err(now) => cur = now,
        }
    }
}

/// Files are "armed" (subject to faults) once they carry a segment name:
/// opened as such, or renamed into place after preallocation.
#[derive(Debug, Default)]
pub struct FaultyFs {
    pub faults: Arc<Faults>,
    pending: Mutex<HashMap<PathBuf, Arc<AtomicBool>>>,
}

impl FaultyFs {
    pub fn options(faults: &Arc<Faults>) -> WalOpenOptions {
        let fs = FaultyFs { faults: Arc::clone(faults), pending: Mutex::default() };
        WalOpenOptions { fs: Arc::new(fs), ..WalOpenOptions::default() }
    }
}

struct FaultyFile {
    inner: Box<dyn WalFile>,
    faults: Arc<Faults>,
    armed: Arc<AtomicBool>,
    torn: AtomicBool,
}

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} failure"))
}

impl WalFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset_bytes: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset_bytes)
    }
    fn write_at(&self, buf: &[u8], offset_bytes: u64) -> io::Result<usize> {
        if !self.armed.load(Ordering::SeqCst) {
            return self.inner.write_at(buf, offset_bytes);
        }
        self.faults.writes.fetch_add(1, Ordering::SeqCst);
        if self.torn.load(Ordering::SeqCst) || fires(&self.faults.fail_write_after) {
            return Err(injected("write"));
        }
        if fires(&self.faults.short_write_after) && buf.len() > 1 {
            self.torn.store(true, Ordering::SeqCst);
            return self.inner.write_at(&buf[..buf.len() / 2], offset_bytes);
        }
        self.inner.write_at(buf, offset_bytes)
    }
    fn sync_data(&self) -> io::Result<()> {
        if self.armed.load(Ordering::SeqCst) {
            self.faults.syncs.fetch_add(1, Ordering::SeqCst);
            if fires(&self.faults.fail_sync_after) {
                return Err(injected("fsync"));
            }
        }
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }
    fn len_bytes(&self) -> io::Result<u64> {
        self.inner.len_bytes()
    }
    fn write_back(&self, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
        self.inner.write_back(offset_bytes, len_bytes)
    }
}

impl FaultyFs {
    fn wrap(&self, path: &Path, inner: Box<dyn WalFile>) -> Box<dyn WalFile> {
        let armed = Arc::new(AtomicBool::new(!path.to_string_lossy().ends_with(".tmp")));
        if !armed.load(Ordering::SeqCst) {
            self.pending.lock().expect("lock").insert(path.to_path_buf(), Arc::clone(&armed));
        }
        Box::new(FaultyFile { inner, faults: Arc::clone(&self.faults), armed, torn: AtomicBool::new(false) })
    }
}

impl FileSystem for FaultyFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        StdFileSystem.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        StdFileSystem.list_dir(dir)
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        Ok(self.wrap(path, StdFileSystem.open(path)?))
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        Ok(self.wrap(path, StdFileSystem.create(path)?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        StdFileSystem.rename(from, to)?;
        if let Some(armed) = self.pending.lock().expect("lock").remove(from) {
            armed.store(true, Ordering::SeqCst);
        }
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        StdFileSystem.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        StdFileSystem.sync_dir(dir)
    }
    fn lock_dir(&self, dir: &Path) -> io::Result<Box<dyn DirLock>> {
        StdFileSystem.lock_dir(dir)
    }
}
