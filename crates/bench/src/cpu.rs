//! CPU of this process's threads, by component, over a measure window:
//! `/proc/self/task/*/stat` read at the window's start and end, each
//! thread's user + system ticks put under the component its name says
//! (pgtier names its threads `pgtier-...`; the driver names its workers
//! `bench-client-N`). In direct mode and with the demo's in-process server,
//! pgtier runs in this process, so this is pgtier's own CPU, beside what
//! [`crate::targets::postgres::PgSampler`] measures of PostgreSQL's.
//!
//! Ticks are the kernel's (usually 10 ms): over a window of seconds, a few
//! percent of a core at most is lost to rounding per thread. A thread that
//! ends inside the window loses its share (the driver's workers and the
//! server's sessions outlive the window); one that starts inside it counts
//! from zero.

use std::time::Instant;

use crate::result::{BackendFigures, CpuShare};
use crate::target::{BackendSampler, DbError};
use crate::targets::postgres::parse_proc_stat;

/// What a thread does, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// The driver's workers: the application. In direct mode they also run
    /// pgtier's SQL and engine code, in-process.
    Clients,
    /// The wire-protocol server: sessions, event loops, the acceptor.
    Server,
    /// The engine's own threads: WAL writer (group commit, the async
    /// commit mode's flush), preallocation, checkpoints.
    Engine,
    /// AWT write-through: the stream reader and the apply lanes.
    WriteThrough,
    /// Other cache threads: aging, SWT resolution, autorefresh.
    CacheBackground,
    /// The benchmark's own sampling and progress threads.
    Measurement,
    /// Anything else (the main thread, unnamed threads).
    Other,
}

impl Component {
    pub const ALL: [Component; 7] = [
        Component::Clients,
        Component::Server,
        Component::Engine,
        Component::WriteThrough,
        Component::CacheBackground,
        Component::Measurement,
        Component::Other,
    ];

    /// The component of a thread named `comm` (Linux keeps 15 bytes of it).
    pub fn of(comm: &str) -> Component {
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| comm.starts_with(p));
        if starts(&["bench-client"]) {
            Component::Clients
        } else if starts(&["pgtier-session", "pgtier-loop", "pgtier-accept", "pgtier-metrics"]) {
            Component::Server
        } else if starts(&["pgtier-wal", "pgtier-engine"]) {
            Component::Engine
        } else if starts(&["pgtier-awt"]) {
            Component::WriteThrough
        } else if starts(&["pgtier-aging", "pgtier-swt", "autorefresh-"]) {
            Component::CacheBackground
        } else if starts(&["pg-sampler", "demo-monitor"]) {
            Component::Measurement
        } else {
            Component::Other
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Component::Clients => "application threads",
            Component::Server => "server threads",
            Component::Engine => "engine background",
            Component::WriteThrough => "write-through",
            Component::CacheBackground => "cache background",
            Component::Measurement => "measurement",
            Component::Other => "other",
        }
    }
}

/// One thread's CPU so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadTicks {
    pub tid: u32,
    pub name: String,
    /// User + system clock ticks.
    pub ticks: u64,
}

/// Every thread of this process now (threads that end while the
/// directory is read are skipped).
pub fn threads() -> Vec<ThreadTicks> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    dir.filter_map(|entry| {
        let entry = entry.ok()?;
        let tid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        let name = stat.get(stat.find('(')? + 1..stat.rfind(')')?)?.to_owned();
        Some(ThreadTicks { tid, name, ticks: parse_proc_stat(&stat)?.own })
    })
    .collect()
}

/// CPU per component between two [`threads`] readings `window_s` apart, in
/// % of one core, in [`Component::ALL`] order, components without threads
/// left out.
pub fn shares(before: &[ThreadTicks], after: &[ThreadTicks], window_s: f64) -> Vec<CpuShare> {
    let per_s = clock_ticks_per_s() * window_s.max(1e-9);
    Component::ALL
        .iter()
        .filter_map(|&component| {
            let mut ticks = 0u64;
            let mut threads = 0u32;
            for t in after.iter().filter(|t| Component::of(&t.name) == component) {
                // A tid reused by a new thread under another name counts from zero.
                let base = before.iter().find(|b| b.tid == t.tid && b.name == t.name).map_or(0, |b| b.ticks);
                ticks += t.ticks.saturating_sub(base);
                threads += 1;
            }
            (threads > 0).then(|| CpuShare {
                component: component.name().to_owned(),
                percent: 100.0 * ticks as f64 / per_s,
                threads,
            })
        })
        .collect()
}

/// Clock ticks per second of /proc's CPU times.
pub(crate) fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// Names the calling thread as `/proc` shows it (15 bytes at most), so its
/// CPU is put under the right [`Component`].
pub fn name_current_thread(name: &str) {
    let mut bytes: Vec<u8> = name.bytes().filter(|&b| b != 0).take(15).collect();
    bytes.push(0);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16
    // bytes from the pointer, which stays valid for the call.
    unsafe {
        libc::prctl(
            libc::PR_SET_NAME,
            bytes.as_ptr() as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// A sampler that adds this process's CPU per component
/// ([`BackendFigures::process_cpu`]) to another's figures (PostgreSQL's),
/// or reports only it.
pub struct WithProcessCpu {
    inner: Option<Box<dyn BackendSampler>>,
    started: Option<(Instant, Vec<ThreadTicks>)>,
}

impl WithProcessCpu {
    pub fn new(inner: Option<Box<dyn BackendSampler>>) -> WithProcessCpu {
        WithProcessCpu { inner, started: None }
    }
}

impl BackendSampler for WithProcessCpu {
    fn start(&mut self) -> Result<(), DbError> {
        self.started = Some((Instant::now(), threads()));
        match &mut self.inner {
            Some(inner) => inner.start(),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> Result<BackendFigures, DbError> {
        let (started, before) = self.started.take().ok_or_else(|| DbError::new(None, "sampler was not started"))?;
        let window_s = started.elapsed().as_secs_f64();
        let process_cpu = shares(&before, &threads(), window_s);
        let mut figures = match &mut self.inner {
            Some(inner) => inner.finish()?,
            None => BackendFigures { source: "this process".to_owned(), window_s, ..BackendFigures::default() },
        };
        figures.process_cpu = process_cpu;
        Ok(figures)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn components_by_thread_name() {
        assert_eq!(Component::of("bench-client-12"), Component::Clients);
        assert_eq!(Component::of("pgtier-session-"), Component::Server);
        assert_eq!(Component::of("pgtier-wal-writ"), Component::Engine);
        assert_eq!(Component::of("pgtier-engine-b"), Component::Engine);
        assert_eq!(Component::of("pgtier-awt"), Component::WriteThrough);
        assert_eq!(Component::of("pgtier-awt-3"), Component::WriteThrough);
        assert_eq!(Component::of("pgtier-aging"), Component::CacheBackground);
        assert_eq!(Component::of("pg-sampler"), Component::Measurement);
        assert_eq!(Component::of("pgtier"), Component::Other);
    }

    #[test]
    fn a_spinning_named_thread_shows_under_its_component() {
        let before = threads();
        let started = Instant::now();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
        let spinner = std::thread::spawn(move || {
            name_current_thread("pgtier-awt-9");
            // Ten ticks of its own CPU however busy the machine is, then it
            // stays alive until its ticks have been read.
            let own = || {
                std::fs::read_to_string("/proc/thread-self/stat")
                    .ok()
                    .and_then(|s| parse_proc_stat(&s))
                    .map_or(0, |t| t.own)
            };
            let first = own();
            let mut x = 0u64;
            while own() < first + 10 {
                for _ in 0..10_000 {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            done_tx.send(()).unwrap();
            exit_rx.recv().unwrap();
            x
        });
        done_rx.recv().unwrap();
        let after = threads();
        let window_s = started.elapsed().as_secs_f64();
        exit_tx.send(()).unwrap();
        spinner.join().unwrap();
        assert!(after.iter().any(|t| t.name == "pgtier-awt-9"), "{after:?}");
        let shares = shares(&before, &after, window_s);
        let awt = shares.iter().find(|s| s.component == Component::WriteThrough.name()).unwrap();
        // At least its ten ticks; at most one core (give or take a tick at each end).
        let ticks = awt.percent / 100.0 * window_s * clock_ticks_per_s();
        assert!(
            ticks > 9.5 && ticks <= window_s * clock_ticks_per_s() + 2.0,
            "{ticks} ticks in {window_s} s: {shares:?}"
        );
        assert_eq!(awt.threads, 1);
    }
}
