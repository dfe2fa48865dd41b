//! What the private server's cgroups share, whichever controller they
//! bound: finding our own cgroup in a hierarchy (v2 unified, or a v1
//! controller's own), naming children so that abandoned ones can be swept,
//! finding a postmaster's children, and handing processes back on removal.
//! [`crate::memory_limit`] bounds memory with it, [`crate::read_throttle`]
//! the data device's reads.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Child cgroups this crate creates are named `pgtier-<pid>-<n>`: an
/// abandoned one (its creator was SIGKILLed) can be recognised and removed.
const CGROUP_PREFIX: &str = "pgtier-";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    V1,
    V2,
}

/// This process's cgroup directory in the hierarchy that has `controller`
/// (v2: `memory`, `io`; v1 names it by the same or its own name, given as
/// `v1_controller`, mounted at `/sys/fs/cgroup/<v1_controller>`), where
/// `v1_probe` exists in v1's root. None when neither hierarchy has it.
pub(crate) fn own_cgroup(controller: &str, v1_controller: &str, v1_probe: &str) -> Option<(Version, PathBuf)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let v2_root = Path::new("/sys/fs/cgroup");
    let v2_has_it = std::fs::read_to_string(v2_root.join("cgroup.controllers"))
        .is_ok_and(|controllers| controllers.split_whitespace().any(|c| c == controller));
    if v2_has_it {
        // "0::/path" is the unified hierarchy's line.
        if let Some(path) = own.lines().find_map(|line| line.strip_prefix("0::")) {
            return Some((Version::V2, v2_root.join(path.trim_start_matches('/'))));
        }
    }
    let v1_root = Path::new("/sys/fs/cgroup").join(v1_controller);
    if v1_root.join(v1_probe).exists() {
        // "4:memory:/path" is a v1 controller's line.
        let path = own
            .lines()
            .find_map(|line| {
                let mut fields = line.splitn(3, ':');
                let _id = fields.next()?;
                let controllers = fields.next()?;
                let path = fields.next()?;
                controllers.split(',').any(|c| c == v1_controller).then_some(path)
            })
            .unwrap_or("/");
        return Some((Version::V1, v1_root.join(path.trim_start_matches('/'))));
    }
    None
}

/// A fresh child directory name under `parent`, after sweeping the
/// abandoned ones there.
pub(crate) fn new_child(parent: &Path) -> PathBuf {
    sweep_abandoned(parent);
    static SEQUENCE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    parent.join(format!("{CGROUP_PREFIX}{}-{n}", std::process::id()))
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

/// Moves `root_pid` and then its children into cgroup `dir`; returns how
/// many processes moved. The root goes first, so a child it forks
/// meanwhile is born inside and one forked before is in the scan.
pub(crate) fn adopt_process_tree(dir: &Path, root_pid: u32) -> std::io::Result<usize> {
    let procs = dir.join("cgroup.procs");
    std::fs::write(&procs, root_pid.to_string())?;
    let mut moved = 1;
    for child in children_of(root_pid) {
        // A backend may exit between the scan and the move.
        if std::fs::write(&procs, child.to_string()).is_ok() {
            moved += 1;
        }
    }
    Ok(moved)
}

/// What still runs in `dir` goes back to `parent`; the then empty cgroup
/// is removed (rmdir fails while a process remains, so a few tries).
pub(crate) fn remove(dir: &Path, parent: &Path) {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.split_whitespace() {
        let _ = std::fs::write(parent.join("cgroup.procs"), pid);
    }
    for _ in 0..40 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
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

pub(crate) fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
