//! A process's resident memory, open file descriptors and threads, from
//! `/proc/<pid>/status` and `/proc/<pid>/fd`.

use std::time::Duration;

/// One reading of one process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    pub rss_bytes: u64,
    pub fds: u64,
    pub threads: u64,
}

/// The fields of `/proc/<pid>/status` the soak needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub rss_bytes: u64,
    pub threads: u64,
    /// `R`, `S`, `Z` (exited, not reaped yet), ...
    pub state: char,
}

/// Parses `/proc/<pid>/status` text; None when a field is missing.
pub fn parse_status(text: &str) -> Option<Status> {
    let field = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(':')).map(str::trim))
    };
    let rss_kb: u64 = field("VmRSS")?.split_whitespace().next()?.parse().ok()?;
    let threads: u64 = field("Threads")?.parse().ok()?;
    let state = field("State")?.chars().next()?;
    Some(Status { rss_bytes: rss_kb * 1024, threads, state })
}

/// Why the process is not there to read, or its reading.
pub fn read(pid: u32) -> Result<Reading, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("process {pid} is gone (/proc/{pid}/status: {e})"))?;
    let status = parse_status(&status).ok_or_else(|| format!("process {pid} has exited (no VmRSS in its status)"))?;
    if status.state == 'Z' || status.state == 'X' {
        return Err(format!("process {pid} has exited"));
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map_err(|e| format!("/proc/{pid}/fd: {e}"))?
        .filter(Result::is_ok)
        .count() as u64;
    Ok(Reading { rss_bytes: status.rss_bytes, fds, threads: status.threads })
}

/// `n` readings `gap` apart: RSS of the last, the fewest fds and threads.
/// Sessions of the churn and cancel threads come and go within
/// milliseconds; the smallest count leaves them out, while what leaks
/// stays in every reading.
pub fn settled(pid: u32, n: u32, gap: Duration) -> Result<Reading, String> {
    let mut out: Option<Reading> = None;
    for i in 0..n.max(1) {
        if i > 0 {
            std::thread::sleep(gap);
        }
        let r = read(pid)?;
        out = Some(match out {
            None => r,
            Some(o) => Reading { rss_bytes: r.rss_bytes, fds: o.fds.min(r.fds), threads: o.threads.min(r.threads) },
        });
    }
    out.ok_or_else(|| "no reading".to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn status_fields() {
        let text = "Name:\tpgtier\nState:\tS (sleeping)\nVmPeak:\t  900 kB\nVmRSS:\t   20480 kB\nThreads:\t17\n";
        assert_eq!(parse_status(text), Some(Status { rss_bytes: 20 * 1024 * 1024, threads: 17, state: 'S' }));
        assert_eq!(parse_status("Name:\tx\nState:\tZ (zombie)\nThreads:\t1\n"), None, "a zombie has no VmRSS");
    }

    #[test]
    fn this_process_reads() {
        let r = settled(std::process::id(), 2, Duration::from_millis(1)).unwrap();
        assert!(r.rss_bytes > 0 && r.fds > 0 && r.threads > 0, "{r:?}");
        assert!(read(u32::MAX).is_err());
    }
}
