//! The file or block device under the store: positional I/O, fdatasync,
//! preallocation, the exclusive lock, and the O_DIRECT decision.
//!
//! Every write the store issues is 4096-aligned in memory, offset and length
//! (see `aligned.rs`), so one code path serves O_DIRECT and buffered I/O.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::aligned::{AlignedBuf, BLOCK_BYTES};
use crate::{DirectIo, IoMode, TierError};

/// Failures a test asks for: the Nth write (or sync) from now fails with EIO.
#[derive(Default)]
struct Faults {
    writes_left: AtomicU64,
    syncs_left: AtomicU64,
}

impl Faults {
    /// True when this operation is the one armed to fail (0 = disarmed).
    fn trip(counter: &AtomicU64) -> bool {
        counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n > 0).then(|| n - 1)).is_ok_and(|n| n == 1)
    }
}

pub(crate) struct Device {
    /// The descriptor all I/O goes through (O_DIRECT when `io_mode` says so).
    file: File,
    /// The descriptor holding the flock (kept open for the store's lifetime).
    _lock: File,
    io_mode: IoMode,
    block_device: bool,
    faults: Faults,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) syncs: AtomicU64,
}

/// The opened, locked file before the O_DIRECT decision.
pub(crate) struct Opened {
    pub file: File,
    pub block_device: bool,
    pub len: u64,
}

/// Opens (creating if needed) and locks the store's file.
pub(crate) fn open_locked(path: &Path) -> Result<Opened, TierError> {
    let what = |verb: &str| format!("{verb} {}", path.display());
    let block_device = match std::fs::metadata(path) {
        Ok(meta) => meta.file_type().is_block_device(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(TierError::io(what("reading the metadata of"), e)),
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(!block_device)
        .truncate(false)
        .open(path)
        .map_err(|e| TierError::io(what("opening"), e))?;
    // SAFETY: flock only reads its integer arguments; the descriptor is open.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(TierError::Locked(format!("{} is open in another store", path.display())));
        }
        return Err(TierError::io(what("locking"), e));
    }
    let len = if block_device {
        use std::io::Seek;
        (&file).seek(io::SeekFrom::End(0)).map_err(|e| TierError::io(what("sizing"), e))?
    } else {
        file.metadata().map_err(|e| TierError::io(what("reading the length of"), e))?.len()
    };
    Ok(Opened { file, block_device, len })
}

/// Makes the file `len` bytes long with its blocks allocated: writing into
/// allocated blocks later costs the fdatasync of the data only, while a
/// growing file pays a metadata journal commit on every sync.
pub(crate) fn preallocate(file: &File, len: u64, path: &Path) -> Result<(), TierError> {
    let off_len = libc::off_t::try_from(len).map_err(|_| TierError::Config(format!("size {len} too large")))?;
    // SAFETY: fallocate only reads its integer arguments; the descriptor is open.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, off_len) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // No preallocation on this file system: fill with zeros instead, so
        // the file still never grows while the store writes.
        Some(libc::EOPNOTSUPP) => {
            zero_fill(file, len).map_err(|e| TierError::io(format!("filling {}", path.display()), e))
        }
        Some(libc::ENOSPC) => Err(TierError::Full(format!("no room for {len} bytes at {}", path.display()))),
        _ => Err(TierError::io(format!("preallocating {}", path.display()), e)),
    }
}

fn zero_fill(file: &File, len: u64) -> io::Result<()> {
    let have = file.metadata()?.len();
    let chunk = vec![0u8; 1 << 20];
    let mut at = have;
    while at < len {
        let n = (len - at).min(chunk.len() as u64) as usize;
        file.write_all_at(&chunk[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

impl Device {
    /// Chooses O_DIRECT or buffered I/O for an opened, sized file.
    pub(crate) fn new(opened: Opened, path: &Path, direct: DirectIo) -> Result<Device, TierError> {
        let (file, io_mode) = match direct {
            DirectIo::Off => (clone_fd(&opened.file, path)?, IoMode::Buffered { reason: "direct_io = off".into() }),
            DirectIo::Auto | DirectIo::On => match probe_direct(path) {
                Ok(file) => (file, IoMode::Direct),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) => {
                    let reason = format!("the file system of {} refused O_DIRECT ({e})", path.display());
                    if direct == DirectIo::On {
                        return Err(TierError::DirectIoUnavailable(reason));
                    }
                    (clone_fd(&opened.file, path)?, IoMode::Buffered { reason })
                }
                Err(e) => return Err(TierError::io(format!("probing O_DIRECT on {}", path.display()), e)),
            },
        };
        if matches!(io_mode, IoMode::Buffered { .. }) {
            // Reads are random record reads: no readahead of neighbours.
            // SAFETY: posix_fadvise only reads its integer arguments.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        }
        Ok(Device {
            file,
            _lock: opened.file,
            io_mode,
            block_device: opened.block_device,
            faults: Faults::default(),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        })
    }

    pub(crate) fn io_mode(&self) -> &IoMode {
        &self.io_mode
    }

    pub(crate) fn is_block_device(&self) -> bool {
        self.block_device
    }

    fn check_aligned(&self, len: usize, ptr: *const u8, offset: u64) {
        if self.io_mode == IoMode::Direct {
            let b = BLOCK_BYTES as u64;
            assert!(
                (len as u64).is_multiple_of(b) && (ptr as u64).is_multiple_of(b) && offset.is_multiple_of(b),
                "unaligned O_DIRECT transfer: {len} bytes at {offset}"
            );
        }
    }

    /// Reads exactly `buf.len()` bytes at `offset`.
    pub(crate) fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_aligned(buf.len(), buf.as_ptr(), offset);
        self.file.read_exact_at(buf, offset)?;
        self.bytes_read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Writes all of `buf` at `offset`.
    pub(crate) fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_aligned(buf.len(), buf.as_ptr(), offset);
        if Faults::trip(&self.faults.writes_left) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.file.write_all_at(buf, offset)?;
        self.bytes_written.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// fdatasync: the written data and the metadata needed to read it back.
    pub(crate) fn sync(&self) -> io::Result<()> {
        if Faults::trip(&self.faults.syncs_left) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.file.sync_data()?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Grows (preallocating) or shrinks a regular file; block devices keep their size.
    pub(crate) fn set_len(&self, len: u64, path: &Path) -> Result<(), TierError> {
        if self.block_device {
            return Ok(());
        }
        let have = self.file.metadata().map_err(|e| TierError::io(format!("sizing {}", path.display()), e))?.len();
        if len > have {
            preallocate(&self.file, len, path)
        } else {
            self.file.set_len(len).map_err(|e| TierError::io(format!("truncating {}", path.display()), e))
        }
    }

    /// Arms failures: the `writes`-th write and the `syncs`-th sync from now fail (0: never).
    pub(crate) fn arm_faults(&self, writes: u64, syncs: u64) {
        self.faults.writes_left.store(writes, Ordering::SeqCst);
        self.faults.syncs_left.store(syncs, Ordering::SeqCst);
    }
}

fn clone_fd(file: &File, path: &Path) -> Result<File, TierError> {
    file.try_clone().map_err(|e| TierError::io(format!("duplicating the descriptor of {}", path.display()), e))
}

/// Opens `path` with O_DIRECT and proves it with one aligned read: some file
/// systems accept the flag at open and refuse the I/O.
fn probe_direct(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(path)?;
    let mut block = AlignedBuf::zeroed(BLOCK_BYTES);
    file.read_exact_at(block.as_mut_slice(), 0)?;
    Ok(file)
}

/// Makes a rename or removal in `path`'s directory durable.
pub(crate) fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}
