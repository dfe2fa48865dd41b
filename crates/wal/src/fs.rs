//! The file-system seam. Production uses [`StdFileSystem`]; tests wrap it to
//! fail the Nth write or sync, or to write short, and prove that the log never
//! reports durability it does not have.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long `lock_dir` waits for a lock held by someone else.
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// Directory-level operations the log needs. All paths are absolute or
/// relative to the process; the log only touches files inside its directory.
pub trait FileSystem: Send + Sync + fmt::Debug + 'static {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names (not paths) of the entries of `dir`.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Box<dyn WalFile>>;
    /// Creates (or truncates) a file for reading and writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WalFile>>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock that keeps a second process (or a second
    /// `Wal` in this one) from opening the same log; released on drop.
    fn lock_dir(&self, dir: &Path) -> io::Result<Box<dyn DirLock>>;
}

/// Held for the lifetime of an open log.
pub trait DirLock: Send + Sync {}

/// Positional I/O on one file. Implementations must be usable from several
/// threads at once (the writer writes while readers read).
pub trait WalFile: Send + Sync {
    fn read_at(&self, buf: &mut [u8], offset_bytes: u64) -> io::Result<usize>;
    fn write_at(&self, buf: &[u8], offset_bytes: u64) -> io::Result<usize>;
    /// fdatasync: data and the metadata needed to read it back.
    fn sync_data(&self) -> io::Result<()>;
    /// fsync: data and all metadata.
    fn sync_all(&self) -> io::Result<()>;
    fn len_bytes(&self) -> io::Result<u64>;
    /// Starts writeback of `[offset, offset + len)` and waits for it, without
    /// syncing metadata (Linux `sync_file_range`). A pacing hint only: it
    /// promises no durability. Preallocation uses it so a 64 MiB zero fill
    /// reaches the disk in small pieces instead of one burst at `fsync` that
    /// would queue ahead of every commit's fdatasync.
    fn write_back(&self, _offset_bytes: u64, _len_bytes: u64) -> io::Result<()> {
        Ok(())
    }
}

/// Writes all of `buf`, looping over short writes.
pub(crate) fn write_all_at(file: &dyn WalFile, mut buf: &[u8], mut offset_bytes: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.write_at(buf, offset_bytes) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "WAL write wrote 0 bytes")),
            Ok(n) => {
                buf = &buf[n..];
                offset_bytes += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads as much of `buf` as the file holds; returns the bytes read (short
/// only at end of file).
pub(crate) fn read_full_at(file: &dyn WalFile, buf: &mut [u8], offset_bytes: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset_bytes + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// `std::fs` on Linux: pwrite/pread, fdatasync, fsync of the directory.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFileSystem;

struct StdFile(File);

impl WalFile for StdFile {
    fn read_at(&self, buf: &mut [u8], offset_bytes: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset_bytes)
    }
    fn write_at(&self, buf: &[u8], offset_bytes: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset_bytes)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }
    fn len_bytes(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn write_back(&self, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
        let (Ok(offset), Ok(len)) = (i64::try_from(offset_bytes), i64::try_from(len_bytes)) else {
            return Ok(());
        };
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: plain syscall on a file descriptor we own; no memory is passed.
        let rc = unsafe { libc::sync_file_range(self.0.as_raw_fd(), offset, len, flags) };
        if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }
}

struct StdDirLock {
    _file: File,
}
impl DirLock for StdDirLock {}

impl FileSystem for StdFileSystem {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        Ok(Box::new(StdFile(OpenOptions::new().read(true).write(true).open(path)?)))
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        Ok(Box::new(StdFile(file)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn lock_dir(&self, dir: &Path) -> io::Result<Box<dyn DirLock>> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(dir.join("LOCK"))?;
        // A lock can outlive its owner briefly: a process that just exited,
        // or a fork in this process that has not yet exec'd and still shares
        // the lock's open file description. Retry for a bounded time.
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Box::new(StdDirLock { _file: file })),
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!("WAL directory {} is locked by another open log", dir.display()),
                    ));
                }
                Err(fs::TryLockError::Error(e)) => return Err(e),
            }
        }
    }
}
