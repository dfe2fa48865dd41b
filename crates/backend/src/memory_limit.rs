//! A memory limit for a private PostgreSQL that bounds its page cache too.
//!
//! `shared_buffers` bounds only PostgreSQL's own buffer pool: every block it
//! reads also lands in the kernel's page cache, which on a 24 GiB machine
//! holds the whole database after one pass. A baseline "with the same
//! memory as pgtier's budget" is therefore meaningless unless the page
//! cache is bounded as well. A memory cgroup does that: the kernel charges
//! the page-cache pages a process faults in to the process's cgroup, and
//! reclaims them when the cgroup reaches its limit (study 003's and 001's
//! baselines had their RAM; ours has this).
//!
//! [`MemoryCgroup::create`] makes a child of this process's own memory
//! cgroup (v2 unified hierarchy, or the v1 `memory` controller), sets its
//! limit, and [`MemoryCgroup::adopt_process_tree`] moves a postmaster and
//! its children into it; backends forked later inherit it. Pages charged
//! before the move stay charged where they were, so the caller evicts the
//! cluster's files from the page cache afterwards ([`evict_page_cache`]).
//! Dropping the cgroup moves what still runs in it back to the parent and
//! removes it (what all our cgroups share is in `cgroup.rs`). Creating one
//! needs root (or a delegated hierarchy): callers treat
//! [`MemoryLimitError`] as "no limit", and must say so in what they report,
//! never silently.

use std::io;
use std::path::{Path, PathBuf};

use crate::cgroup::{Version, adopt_process_tree, new_child, own_cgroup, read_u64, remove};

/// Below this PostgreSQL cannot even start its backends.
pub const MEMORY_LIMIT_MIN: u64 = 32 << 20;

#[derive(Debug, thiserror::Error)]
pub enum MemoryLimitError {
    #[error("no memory cgroup controller is mounted (looked for cgroup v2 with `memory` and v1's `memory`)")]
    NoController,
    #[error("memory limit {bytes} B is below the minimum of {MEMORY_LIMIT_MIN} B")]
    TooSmall { bytes: u64 },
    #[error("cannot {action} {path}: {source} (memory cgroups need root or a delegated hierarchy)")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> MemoryLimitError {
    let path = path.to_path_buf();
    move |source| MemoryLimitError::Io { action, path, source }
}

/// The memory controller's files, by hierarchy.
impl Version {
    fn limit_file(self) -> &'static str {
        match self {
            Version::V1 => "memory.limit_in_bytes",
            Version::V2 => "memory.max",
        }
    }

    fn usage_file(self) -> &'static str {
        match self {
            Version::V1 => "memory.usage_in_bytes",
            Version::V2 => "memory.current",
        }
    }

    /// The `memory.stat` key of page-cache bytes.
    fn cache_key(self) -> &'static str {
        match self {
            Version::V1 => "cache",
            Version::V2 => "file",
        }
    }
}

/// A memory cgroup of our own; removed on drop.
#[derive(Debug)]
pub struct MemoryCgroup {
    dir: PathBuf,
    /// Where processes go back to on drop (our own cgroup).
    parent: PathBuf,
    version: Version,
    limit: u64,
}

impl MemoryCgroup {
    /// A new child of this process's memory cgroup limited to `bytes`.
    pub fn create(bytes: u64) -> Result<MemoryCgroup, MemoryLimitError> {
        if bytes < MEMORY_LIMIT_MIN {
            return Err(MemoryLimitError::TooSmall { bytes });
        }
        let (version, parent) =
            own_cgroup("memory", "memory", "memory.limit_in_bytes").ok_or(MemoryLimitError::NoController)?;
        let dir = new_child(&parent);
        std::fs::create_dir(&dir).map_err(io_error("create the memory cgroup", &dir))?;
        let cgroup = MemoryCgroup { dir, parent, version, limit: bytes };
        let limit_file = cgroup.dir.join(version.limit_file());
        std::fs::write(&limit_file, bytes.to_string()).map_err(io_error("set the memory limit in", &limit_file))?;
        if version == Version::V2 {
            // No swap: the limit must bound memory, not move it to disk.
            let _ = std::fs::write(cgroup.dir.join("memory.swap.max"), "0");
        }
        Ok(cgroup)
    }

    pub fn limit_bytes(&self) -> u64 {
        self.limit
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Moves `root_pid` and then its children into this cgroup; returns how
    /// many processes moved. The root goes first, so a child it forks
    /// meanwhile is born inside and one forked before is in the scan.
    pub fn adopt_process_tree(&self, root_pid: u32) -> Result<usize, MemoryLimitError> {
        let procs = self.dir.join("cgroup.procs");
        adopt_process_tree(&self.dir, root_pid).map_err(io_error("move a process into", &procs))
    }

    /// Bytes charged now (processes, page cache, shared memory).
    pub fn usage_bytes(&self) -> Option<u64> {
        read_u64(&self.dir.join(self.version.usage_file()))
    }

    /// The most ever charged (v1 `max_usage_in_bytes`, v2 `memory.peak`).
    pub fn peak_bytes(&self) -> Option<u64> {
        match self.version {
            Version::V1 => read_u64(&self.dir.join("memory.max_usage_in_bytes")),
            Version::V2 => read_u64(&self.dir.join("memory.peak")),
        }
    }

    /// Page-cache bytes charged now: cached file data, without the shared
    /// memory both hierarchies count in the same figure (PostgreSQL's
    /// buffer pool and WAL buffers are shared memory, not page cache).
    pub fn page_cache_bytes(&self) -> Option<u64> {
        let stat = std::fs::read_to_string(self.dir.join("memory.stat")).ok()?;
        let value = |key: &str| {
            stat.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
        };
        Some(value(self.version.cache_key())?.saturating_sub(value("shmem").unwrap_or(0)))
    }

    /// A new limit, at once: above what is charged it is only room; below
    /// it the kernel reclaims page cache down to it first.
    pub fn set_limit(&mut self, bytes: u64) -> Result<(), MemoryLimitError> {
        if bytes < MEMORY_LIMIT_MIN {
            return Err(MemoryLimitError::TooSmall { bytes });
        }
        let limit_file = self.dir.join(self.version.limit_file());
        std::fs::write(&limit_file, bytes.to_string()).map_err(io_error("set the memory limit in", &limit_file))?;
        self.limit = bytes;
        Ok(())
    }

    /// Times the kernel had to reclaim at the limit (v1 `failcnt`, v2 `max` events).
    pub fn limit_hits(&self) -> Option<u64> {
        match self.version {
            Version::V1 => read_u64(&self.dir.join("memory.failcnt")),
            Version::V2 => {
                let events = std::fs::read_to_string(self.dir.join("memory.events")).ok()?;
                events.lines().find_map(|line| line.strip_prefix("max ")?.trim().parse().ok())
            }
        }
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        remove(&self.dir, &self.parent);
    }
}

/// Drops the clean page-cache pages of every file under `dir`
/// (`POSIX_FADV_DONTNEED`), so that what a cgroup-limited server reads next
/// is charged to it rather than found in pages charged elsewhere. Dirty
/// pages are not dropped: checkpoint first. Returns the files advised.
pub fn evict_page_cache(dir: &Path) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut advised = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                let Ok(file) = std::fs::File::open(entry.path()) else { continue };
                // SAFETY: fadvise on an open descriptor; no memory is passed.
                unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                advised += 1;
            }
        }
    }
    Ok(advised)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::is_root;

    #[test]
    fn a_limit_below_the_minimum_is_refused() {
        assert!(matches!(MemoryCgroup::create(1 << 20), Err(MemoryLimitError::TooSmall { .. })));
    }

    /// Where cgroups can be made (root here, CI too), a child process moved
    /// into one is counted there, and the cgroup is gone after drop.
    #[test]
    fn a_process_tree_is_adopted_and_the_cgroup_removed_on_drop() {
        let cgroup = match MemoryCgroup::create(64 << 20) {
            Ok(cgroup) => cgroup,
            Err(error) => {
                assert!(!is_root(), "root could not create a memory cgroup: {error} (the fair baseline needs one)");
                return;
            }
        };
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("spawn sleep");
        let moved = cgroup.adopt_process_tree(child.id()).expect("adopt");
        assert_eq!(moved, 1);
        let procs = std::fs::read_to_string(cgroup.path().join("cgroup.procs")).expect("read procs");
        assert!(procs.split_whitespace().any(|p| p == child.id().to_string()), "{procs}");
        assert!(cgroup.usage_bytes().is_some());
        let path = cgroup.path().to_path_buf();
        drop(cgroup);
        assert!(!path.exists(), "the cgroup outlived its owner");
        let _ = child.kill();
        let _ = child.wait();
    }
}
