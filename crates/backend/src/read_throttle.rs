//! A ceiling on the reads a private PostgreSQL makes from its data device:
//! slower primary storage, emulated, for benchmarks that reproduce a study
//! whose baseline read from spinning disks (study 003: 95 disks of 10,000
//! rpm behind a SAN) on a machine whose disk answers in a tenth of a
//! millisecond. A flash tier can only win what the storage under the
//! database loses; on fast storage that is little, and saying so is the
//! honest default. With the ceiling, the comparison asks the study's
//! question: the same PostgreSQL, on slower storage, alone or behind
//! pgtier's memory + flash (whose flash file, written and read by pgtier's
//! own process, is not throttled).
//!
//! The block I/O controller does it: v1 `blkio.throttle.read_iops_device`
//! or v2 `io.max` (`riops=`), for the whole disk under the data directory.
//! Reads past the ceiling wait in the kernel; writes are not throttled
//! (buffered writes reach the disk from the kernel's writeback, which v1
//! does not charge to the writer anyway). [`ReadThrottle::create`] makes a
//! child of this process's block I/O cgroup; in v2, where a process is in
//! one cgroup for every controller, a server already in a memory cgroup of
//! ours is throttled there instead ([`ReadThrottle::within`]).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::cgroup::{Version, adopt_process_tree, new_child, own_cgroup, remove};
use crate::memory_limit::MemoryCgroup;

#[derive(Debug, thiserror::Error)]
pub enum ReadThrottleError {
    #[error("no block I/O cgroup controller is mounted (looked for cgroup v2 with `io` and v1's `blkio`)")]
    NoController,
    #[error("{path} is on no block device (device {major}:{minor}: tmpfs, overlay or a network filesystem)")]
    NoBlockDevice { path: PathBuf, major: u32, minor: u32 },
    #[error("a read ceiling of 0 IOPS would stop PostgreSQL")]
    Zero,
    #[error("cannot {action} {path}: {source} (block I/O cgroups need root or a delegated hierarchy)")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ReadThrottleError {
    let path = path.to_path_buf();
    move |source| ReadThrottleError::Io { action, path, source }
}

/// The whole disk a file or directory lives on, as `major:minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disk {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl Disk {
    /// The disk under `path`: its filesystem's device, or that partition's
    /// disk (throttling applies to whole disks).
    pub fn of(path: &Path) -> Result<Disk, ReadThrottleError> {
        let dev = std::fs::metadata(path).map_err(io_error("stat", path))?.dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        if !sys.exists() {
            return Err(ReadThrottleError::NoBlockDevice { path: path.to_path_buf(), major, minor });
        }
        if sys.join("partition").exists()
            && let Ok(device) = std::fs::canonicalize(&sys)
            && let Some(disk) = device.parent()
            && let Ok(text) = std::fs::read_to_string(disk.join("dev"))
            && let Some((major, minor)) = text.trim().split_once(':')
            && let (Ok(major), Ok(minor)) = (major.parse(), minor.parse())
        {
            return Ok(Disk { major, minor });
        }
        Ok(Disk { major, minor })
    }
}

/// Where the ceiling is written, and what undoes it.
#[derive(Debug)]
enum Place {
    /// A cgroup of our own (v1 `blkio`, or v2 without a memory cgroup):
    /// removed on drop, its processes handed back to `parent`.
    Own { parent: PathBuf },
    /// A v2 memory cgroup of ours: the ceiling is lifted on drop, the
    /// cgroup is its owner's.
    Within,
}

/// A read ceiling on one disk for the processes of one cgroup.
#[derive(Debug)]
pub struct ReadThrottle {
    dir: PathBuf,
    version: Version,
    place: Place,
    disk: Disk,
    read_iops: u64,
}

impl ReadThrottle {
    /// A new child of this process's block I/O cgroup whose processes read
    /// `disk` at most `read_iops` times a second; adopt processes with
    /// [`Self::adopt_process_tree`].
    pub fn create(disk: Disk, read_iops: u64) -> Result<ReadThrottle, ReadThrottleError> {
        if read_iops == 0 {
            return Err(ReadThrottleError::Zero);
        }
        let (version, parent) =
            own_cgroup("io", "blkio", "blkio.throttle.read_iops_device").ok_or(ReadThrottleError::NoController)?;
        if version == Version::V2 {
            enable_io_below(&parent)?;
        }
        let dir = new_child(&parent);
        std::fs::create_dir(&dir).map_err(io_error("create the block I/O cgroup", &dir))?;
        let throttle = ReadThrottle { dir, version, place: Place::Own { parent }, disk, read_iops };
        throttle.write_ceiling(Some(read_iops))?;
        Ok(throttle)
    }

    /// The ceiling on v2's `memory`'s own cgroup, where the server already
    /// runs (v2 has one cgroup per process for all controllers); v1 keeps
    /// the hierarchies apart, so there it is [`Self::create`]'s.
    pub fn within(memory: &MemoryCgroup, disk: Disk, read_iops: u64) -> Result<ReadThrottle, ReadThrottleError> {
        let dir = memory.path().to_path_buf();
        let is_v2 = dir.join("cgroup.controllers").exists() && !dir.join("memory.limit_in_bytes").exists();
        if !is_v2 {
            return ReadThrottle::create(disk, read_iops);
        }
        if read_iops == 0 {
            return Err(ReadThrottleError::Zero);
        }
        if let Some(parent) = dir.parent() {
            enable_io_below(parent)?;
        }
        let throttle = ReadThrottle { dir, version: Version::V2, place: Place::Within, disk, read_iops };
        throttle.write_ceiling(Some(read_iops))?;
        Ok(throttle)
    }

    /// Moves `root_pid` and its children into the throttled cgroup (a
    /// no-op for one [`Self::within`] a memory cgroup: they are there).
    pub fn adopt_process_tree(&self, root_pid: u32) -> Result<usize, ReadThrottleError> {
        if matches!(self.place, Place::Within) {
            return Ok(0);
        }
        let procs = self.dir.join("cgroup.procs");
        adopt_process_tree(&self.dir, root_pid).map_err(io_error("move a process into", &procs))
    }

    pub fn read_iops(&self) -> u64 {
        self.read_iops
    }

    pub fn disk(&self) -> Disk {
        self.disk
    }

    /// Reads the cgroup's processes have made from the disk so far.
    pub fn reads(&self) -> Option<u64> {
        match self.version {
            Version::V1 => {
                // "254:0 Read 1234" among Write/Sync/Async/Total lines.
                let text = std::fs::read_to_string(self.dir.join("blkio.throttle.io_serviced")).ok()?;
                let prefix = format!("{} Read ", self.disk);
                text.lines().find_map(|line| line.strip_prefix(&prefix)?.trim().parse().ok())
            }
            Version::V2 => {
                // "254:0 rbytes=.. wbytes=.. rios=1234 ..."
                let text = std::fs::read_to_string(self.dir.join("io.stat")).ok()?;
                let prefix = format!("{} ", self.disk);
                let line = text.lines().find(|line| line.starts_with(&prefix))?;
                line.split_whitespace().find_map(|field| field.strip_prefix("rios=")?.parse().ok())
            }
        }
    }

    fn write_ceiling(&self, read_iops: Option<u64>) -> Result<(), ReadThrottleError> {
        let (file, line) = match (self.version, read_iops) {
            // v1: a limit of 0 removes the rule.
            (Version::V1, iops) => ("blkio.throttle.read_iops_device", format!("{} {}", self.disk, iops.unwrap_or(0))),
            (Version::V2, Some(iops)) => ("io.max", format!("{} riops={iops}", self.disk)),
            (Version::V2, None) => ("io.max", format!("{} riops=max", self.disk)),
        };
        let path = self.dir.join(file);
        std::fs::write(&path, line).map_err(io_error("set the read ceiling in", &path))
    }
}

impl Drop for ReadThrottle {
    fn drop(&mut self) {
        match &self.place {
            Place::Own { parent } => remove(&self.dir, parent),
            Place::Within => {
                let _ = self.write_ceiling(None);
            }
        }
    }
}

/// v2 hands a controller to children only when the parent enables it.
fn enable_io_below(parent: &Path) -> Result<(), ReadThrottleError> {
    let control = parent.join("cgroup.subtree_control");
    let enabled = std::fs::read_to_string(&control).unwrap_or_default();
    if enabled.split_whitespace().any(|c| c == "io") {
        return Ok(());
    }
    std::fs::write(&control, "+io").map_err(io_error("enable the io controller in", &control))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::is_root;

    #[test]
    fn a_zero_ceiling_is_refused() {
        let disk = Disk { major: 1, minor: 0 };
        assert!(matches!(ReadThrottle::create(disk, 0), Err(ReadThrottleError::Zero)));
    }

    /// Where cgroups can be made (root here, CI too): a process that reads
    /// the disk past the page cache is held to the ceiling, and the cgroup
    /// is gone after drop.
    #[test]
    fn reads_past_the_ceiling_wait() {
        use std::io::Write;
        // /tmp may be a tmpfs: then beside the sources, on a disk.
        let dir = tempfile::tempdir()
            .ok()
            .filter(|dir| Disk::of(dir.path()).is_ok())
            .unwrap_or_else(|| tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).expect("temp dir"));
        let disk = match Disk::of(dir.path()) {
            Ok(disk) => disk,
            Err(error) => {
                eprintln!("not on a block device, nothing to throttle: {error}");
                return;
            }
        };
        let throttle = match ReadThrottle::create(disk, 100) {
            Ok(throttle) => throttle,
            Err(error) => {
                assert!(!is_root(), "root could not create a block I/O cgroup: {error}");
                return;
            }
        };
        // A file read with O_DIRECT, 4 KB at a time: each read is one I/O.
        // The reader waits for a line on stdin, so it reads only once adopted.
        let path = dir.path().join("data");
        std::fs::write(&path, vec![7u8; 1 << 20]).expect("write");
        let reader = format!(
            "import mmap, os, sys, time\nsys.stdin.readline()\nfd = os.open('{}', os.O_RDONLY | os.O_DIRECT)\n\
             buf = mmap.mmap(-1, 4096)\nstart = time.monotonic()\nfor i in range(60):\n\
             \x20   os.preadv(fd, [buf], (i * 4096) % (1 << 20))\nprint(time.monotonic() - start)\n",
            path.display()
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &reader])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        throttle.adopt_process_tree(child.id()).expect("adopt");
        child.stdin.take().expect("stdin").write_all(b"go\n").expect("start the reader");
        let output = child.wait_with_output().expect("wait");
        let seconds: f64 = String::from_utf8_lossy(&output.stdout).trim().parse().expect("elapsed seconds");
        // 60 reads at 100 a second take about 0.6 s; unthrottled, a few ms.
        assert!(seconds > 0.3, "60 reads at a ceiling of 100/s took {seconds:.3} s");
        assert!(throttle.reads().is_some_and(|reads| reads >= 30), "reads counted: {:?}", throttle.reads());
        let path = throttle.dir.clone();
        drop(throttle);
        assert!(!path.exists(), "the cgroup outlived its owner");
    }
}
