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
//! removes it. Creating one needs root (or a delegated hierarchy): callers
//! treat [`MemoryLimitError`] as "no limit", and must say so in what they
//! report, never silently.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Child cgroups this module creates are named `pgtier-<pid>-<n>`: an
/// abandoned one (its creator was SIGKILLed) can be recognised and removed.
const CGROUP_PREFIX: &str = "pgtier-";
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

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
        let (version, parent) = own_memory_cgroup()?;
        sweep_abandoned(&parent);
        static SEQUENCE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = parent.join(format!("{CGROUP_PREFIX}{}-{n}", std::process::id()));
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
        self.adopt(root_pid)?;
        let mut moved = 1;
        for child in children_of(root_pid) {
            // A backend may exit between the scan and the move.
            if self.adopt(child).is_ok() {
                moved += 1;
            }
        }
        Ok(moved)
    }

    fn adopt(&self, pid: u32) -> Result<(), MemoryLimitError> {
        let procs = self.dir.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string()).map_err(io_error("move a process into", &procs))
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
        // What still runs here goes back to our own cgroup; an empty cgroup
        // can then be removed (rmdir fails while a process remains).
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = std::fs::write(self.parent.join("cgroup.procs"), pid);
        }
        for _ in 0..40 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

/// This process's memory cgroup directory and the hierarchy's version.
fn own_memory_cgroup() -> Result<(Version, PathBuf), MemoryLimitError> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let v2_root = Path::new("/sys/fs/cgroup");
    let v2_has_memory = std::fs::read_to_string(v2_root.join("cgroup.controllers"))
        .is_ok_and(|controllers| controllers.split_whitespace().any(|c| c == "memory"));
    if v2_has_memory {
        // "0::/path" is the unified hierarchy's line.
        if let Some(path) = own.lines().find_map(|line| line.strip_prefix("0::")) {
            return Ok((Version::V2, v2_root.join(path.trim_start_matches('/'))));
        }
    }
    let v1_root = Path::new("/sys/fs/cgroup/memory");
    if v1_root.join("memory.limit_in_bytes").exists() {
        // "4:memory:/path" is the v1 memory controller's line.
        let path = own
            .lines()
            .find_map(|line| {
                let mut fields = line.splitn(3, ':');
                let _id = fields.next()?;
                let controllers = fields.next()?;
                let path = fields.next()?;
                controllers.split(',').any(|c| c == "memory").then_some(path)
            })
            .unwrap_or("/");
        return Ok((Version::V1, v1_root.join(path.trim_start_matches('/'))));
    }
    Err(MemoryLimitError::NoController)
}

/// Removes empty `pgtier-<pid>-*` cgroups whose creator is gone.
fn sweep_abandoned(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(CGROUP_PREFIX)) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            // Fails (harmlessly) while processes remain in it.
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Direct children of `pid` (PostgreSQL's processes are all the postmaster's).
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return children };
    for entry in entries.flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let Some(after_comm) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let ppid = after_comm.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            children.push(child);
        }
    }
    children
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
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
                assert!(!nix_is_root(), "root could not create a memory cgroup: {error} (the fair baseline needs one)");
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

    fn nix_is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }
}
