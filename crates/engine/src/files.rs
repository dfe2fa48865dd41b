//! File-system steps shared by the files the engine replaces atomically
//! (checkpoints, consumer positions): write a temporary file, fsync it,
//! rename it over the old one, then fsync the directory so the rename
//! itself survives a crash.

use std::fs::OpenOptions;
use std::path::Path;

use crate::error::{EngineError, Result};

/// Makes the entries of `dir` (a rename into it) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let d = OpenOptions::new().read(true).open(dir).map_err(|e| EngineError::io("open directory", e))?;
    d.sync_all().map_err(|e| EngineError::io("fsync directory", e))
}

/// The lock file every open database holds in its directory: two engines
/// writing one WAL and one set of checkpoints would each overwrite what
/// the other acknowledged (a second `pgtier serve` on the same directory,
/// a service manager starting the next one before the last has exited).
pub(crate) const LOCK_FILE: &str = "pgtier.lock";

/// An exclusive `flock` on `dir`'s [`LOCK_FILE`], held until drop (and by
/// the kernel only while this process lives: a crashed holder leaves no
/// stale lock, as a pid file would). Taken without waiting: the directory
/// is in use, or it is not.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: std::fs::File,
}

impl DirLock {
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock> {
        use std::os::fd::AsRawFd;
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| EngineError::io(format!("open {}", path.display()), e))?;
        // SAFETY: flock only reads its integer arguments; the descriptor is open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(EngineError::DirectoryInUse {
                    dir: dir.display().to_string(),
                    lock_file: path.display().to_string(),
                });
            }
            return Err(EngineError::io(format!("lock {}", path.display()), error));
        }
        Ok(DirLock { _file: file })
    }
}
