//! What the analytic executor may take from the machine (study 004: OLTP
//! and OLAP on one server, OLTP rates barely moved): how many worker
//! threads ([`OlapConfig::cpu_share`] or an explicit `threads`), at which
//! scheduling priority ([`OlapConfig::nice`]), on which CPUs
//! ([`Placement`], HPE-ATX's launch policies) and how much memory
//! ([`OlapConfig::memory_limit`], DataFusion's memory pool).
//!
//! The plan ([`ExecutorPlan`]) is computed once at `OlapEngine::start`
//! from the CPU topology (sysfs, online CPUs this process may run on) by a
//! pure function ([`place`]), and applied by each executor thread as it
//! starts (tokio's `on_thread_start`, feature `datafusion`).

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::engine::OlapConfig;

/// Where the executor's worker threads run (study 004's HPE-ATX launch
/// policies, with a core/SMT level below the socket).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// No pinning: the kernel places and moves the workers (ATX's `None`).
    /// The default: the OLTP threads are not pinned either, and pinning
    /// only the analytic workers takes from the scheduler the freedom to
    /// move them off a core a session thread wants; with two CPUs shared
    /// by everything, that freedom (and `nice`) matters more than locality.
    #[default]
    None,
    /// Spread: socket 0 core 0, socket 1 core 0, socket 0 core 1, ... (one
    /// worker per physical core before any SMT sibling).
    RoundRobin,
    /// Fill socket 0 (its cores, then their SMT siblings) before socket 1.
    FillFirst,
    /// As few physical cores as possible: both SMT siblings of a core
    /// before the next core, socket 0 first.
    Pack,
}

impl Placement {
    pub const NAMES: [&'static str; 4] = ["none", "round_robin", "fill_first", "pack"];

    pub fn name(self) -> &'static str {
        match self {
            Placement::None => "none",
            Placement::RoundRobin => "round_robin",
            Placement::FillFirst => "fill_first",
            Placement::Pack => "pack",
        }
    }

    /// The policy named `name` (one of [`Placement::NAMES`]).
    pub fn parse(name: &str) -> Option<Placement> {
        match name {
            "none" => Some(Placement::None),
            "round_robin" => Some(Placement::RoundRobin),
            "fill_first" => Some(Placement::FillFirst),
            "pack" => Some(Placement::Pack),
            _ => None,
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One logical CPU: its id and the physical core (socket, core id) it is
/// a hardware thread of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpu {
    pub id: usize,
    pub socket: usize,
    pub core: usize,
}

/// The CPUs the executor may be placed on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    pub cpus: Vec<Cpu>,
}

impl Topology {
    /// The online CPUs this process may run on (its affinity mask, e.g. a
    /// container's cpuset), with their socket and core from sysfs.
    pub fn read() -> Result<Topology, String> {
        let allowed = allowed_cpus()?;
        Topology::from_sysfs(Path::new("/sys/devices/system/cpu"), allowed.as_deref())
    }

    /// Reads `root/online` and `root/cpuN/topology/{physical_package_id,core_id}`;
    /// keeps the CPUs in `allowed` when given.
    pub fn from_sysfs(root: &Path, allowed: Option<&[usize]>) -> Result<Topology, String> {
        let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
        let online = parse_cpu_list(read(&root.join("online"))?.trim())?;
        let mut cpus = Vec::new();
        for id in online {
            if allowed.is_some_and(|a| !a.contains(&id)) {
                continue;
            }
            let dir = root.join(format!("cpu{id}/topology"));
            let number = |file: &str| -> Result<usize, String> {
                let text = read(&dir.join(file))?;
                // -1 (no package information, some virtual machines): one socket.
                let n: i64 = text.trim().parse().map_err(|_| format!("{}/{file}: {text:?}", dir.display()))?;
                Ok(usize::try_from(n).unwrap_or(0))
            };
            cpus.push(Cpu { id, socket: number("physical_package_id")?, core: number("core_id")? });
        }
        if cpus.is_empty() {
            return Err("no online CPU this process may run on".into());
        }
        Ok(Topology { cpus })
    }

    pub fn sockets(&self) -> usize {
        let mut s: Vec<usize> = self.cpus.iter().map(|c| c.socket).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    }

    /// Physical cores (distinct (socket, core id)).
    pub fn cores(&self) -> usize {
        let mut c: Vec<(usize, usize)> = self.cpus.iter().map(|c| (c.socket, c.core)).collect();
        c.sort_unstable();
        c.dedup();
        c.len()
    }

    /// Whether some core has more than one hardware thread here.
    pub fn smt(&self) -> bool {
        self.cpus.len() > self.cores()
    }

    /// Sockets in id order, each its cores in core-id order, each its CPUs
    /// (SMT siblings) in id order.
    fn nested(&self) -> Vec<Vec<Vec<usize>>> {
        let mut cpus = self.cpus.clone();
        cpus.sort_by_key(|c| (c.socket, c.core, c.id));
        let mut sockets: Vec<Vec<Vec<usize>>> = Vec::new();
        let mut last: Option<(usize, usize)> = None;
        for c in cpus {
            match last {
                Some((s, _)) if s != c.socket => sockets.push(vec![vec![c.id]]),
                None => sockets.push(vec![vec![c.id]]),
                Some((_, core)) if core != c.core => sockets.last_mut().into_iter().for_each(|s| s.push(vec![c.id])),
                Some(_) => {
                    sockets.last_mut().and_then(|s| s.last_mut()).into_iter().for_each(|core| core.push(c.id));
                }
            }
            last = Some((c.socket, c.core));
        }
        sockets
    }
}

/// "0-3,6,8-9" (sysfs' CPU list format) as CPU ids.
fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("bad CPU list {text:?}");
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        out.extend(a..=b);
    }
    Ok(out)
}

/// The CPUs in the calling thread's affinity mask (None where unknown).
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Result<Option<Vec<usize>>, String> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes
    // at most size_of::<cpu_set_t>() bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(format!("sched_getaffinity: {}", std::io::Error::last_os_error()));
    }
    let bits = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: cpu < the set's size in bits.
    Ok(Some((0..bits).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect()))
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Result<Option<Vec<usize>>, String> {
    Ok(None)
}

/// The CPU of each of `n` workers under `policy` (None: not pinned). More
/// workers than CPUs wrap around the same order.
pub fn place(topology: &Topology, policy: Placement, n: usize) -> Vec<Option<usize>> {
    let sockets = topology.nested();
    let order: Vec<usize> = match policy {
        Placement::None => return vec![None; n],
        // SMT level first (one thread per core before any sibling), then
        // the core index, then the socket: consecutive workers land on
        // different sockets.
        Placement::RoundRobin => {
            let mut keyed = Vec::new();
            for (s, cores) in sockets.iter().enumerate() {
                for (c, siblings) in cores.iter().enumerate() {
                    for (t, &cpu) in siblings.iter().enumerate() {
                        keyed.push(((t, c, s), cpu));
                    }
                }
            }
            keyed.sort_unstable();
            keyed.into_iter().map(|(_, cpu)| cpu).collect()
        }
        // Socket by socket; inside one, a thread per core before siblings.
        Placement::FillFirst => sockets
            .iter()
            .flat_map(|cores| {
                let mut keyed: Vec<((usize, usize), usize)> = Vec::new();
                for (c, siblings) in cores.iter().enumerate() {
                    keyed.extend(siblings.iter().enumerate().map(|(t, &cpu)| ((t, c), cpu)));
                }
                keyed.sort_unstable();
                keyed.into_iter().map(|(_, cpu)| cpu)
            })
            .collect(),
        Placement::Pack => sockets.iter().flatten().flatten().copied().collect(),
    };
    if order.is_empty() {
        return vec![None; n];
    }
    (0..n).map(|i| Some(order[i % order.len()])).collect()
}

/// `max(1, round(cpus * cpu_share))` unless `threads` is set (non-zero):
/// an explicit count wins.
pub fn executor_threads(config: &OlapConfig, cpus: usize) -> usize {
    if config.threads > 0 {
        return config.threads;
    }
    ((cpus as f64 * config.cpu_share).round() as usize).max(1)
}

/// What the executor runs as, decided at start, and what its threads
/// reported when they started.
#[derive(Debug)]
pub(crate) struct ExecutorPlan {
    pub(crate) threads: usize,
    pub(crate) explicit_threads: bool,
    pub(crate) cpu_share: f64,
    pub(crate) cpus: usize,
    pub(crate) nice: i32,
    pub(crate) sched_idle: bool,
    pub(crate) placement: Placement,
    pub(crate) worker_cpus: Vec<Option<usize>>,
    pub(crate) topology: Result<Topology, String>,
    pub(crate) memory_limit: Option<usize>,
    started: AtomicUsize,
    /// The first few failures of a thread to pin itself or lower its priority.
    errors: Mutex<Vec<String>>,
}

/// Failures kept for the report (a failing call fails for every thread alike).
const ERRORS_KEPT: usize = 4;

impl ExecutorPlan {
    pub(crate) fn new(config: &OlapConfig) -> ExecutorPlan {
        let topology = Topology::read();
        let cpus = match &topology {
            Ok(t) => t.cpus.len(),
            Err(_) => std::thread::available_parallelism().map_or(1, usize::from),
        };
        let threads = executor_threads(config, cpus);
        let worker_cpus = match &topology {
            Ok(t) => place(t, config.placement, threads),
            Err(_) => vec![None; threads],
        };
        ExecutorPlan {
            threads,
            explicit_threads: config.threads > 0,
            cpu_share: config.cpu_share,
            cpus,
            nice: config.nice,
            sched_idle: config.sched_idle,
            placement: config.placement,
            worker_cpus,
            topology,
            memory_limit: config.memory_limit,
            started: AtomicUsize::new(0),
            errors: Mutex::new(Vec::new()),
        }
    }

    /// Run by each executor thread as it starts: the i-th pins itself to
    /// worker i's CPU (modulo the workers: tokio's blocking threads start
    /// through the same hook) and lowers its priority (SCHED_IDLE or `nice`).
    #[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
    pub(crate) fn on_thread_start(&self) {
        let i = self.started.fetch_add(1, Ordering::Relaxed);
        let cpu = self.worker_cpus.get(i % self.worker_cpus.len().max(1)).copied().flatten();
        let mut failed = Vec::new();
        if let Some(cpu) = cpu
            && let Err(e) = pin_current_thread(cpu)
        {
            failed.push(format!("thread {i}: pinning to CPU {cpu}: {e}"));
        }
        if let Err(e) = self.lower_priority() {
            failed.push(format!("thread {i}: {e}"));
        }
        self.record(failed);
    }

    /// SCHED_IDLE, or `nice` lower: what the executor and the merger run at.
    fn lower_priority(&self) -> Result<(), String> {
        if self.sched_idle {
            idle_current_thread().map_err(|e| format!("SCHED_IDLE: {e}"))
        } else if self.nice > 0 {
            lower_current_thread_priority(self.nice).map_err(|e| format!("nice +{}: {e}", self.nice))
        } else {
            Ok(())
        }
    }

    /// Run by the merger as it starts: a merge only makes later reads
    /// cheaper, so it runs at the executor's priority, not OLTP's. The
    /// applier keeps the process's: every analytic query waits for it to
    /// reach its snapshot, and its work grows with OLTP's, not analytics'.
    pub(crate) fn lower_background_thread(&self, name: &str) {
        if let Err(e) = self.lower_priority() {
            self.record(vec![format!("{name}: {e}")]);
        }
    }

    fn record(&self, failed: Vec<String>) {
        if !failed.is_empty() {
            let mut errors = self.errors.lock();
            let room = ERRORS_KEPT.saturating_sub(errors.len());
            errors.extend(failed.into_iter().take(room));
        }
    }

    pub(crate) fn report(&self) -> ExecutorReport {
        let (sockets, cores, smt, topology_error) = match &self.topology {
            Ok(t) => (t.sockets(), t.cores(), t.smt(), None),
            Err(e) => (0, 0, false, Some(e.clone())),
        };
        ExecutorReport {
            threads: self.threads,
            explicit_threads: self.explicit_threads,
            cpu_share: self.cpu_share,
            cpus: self.cpus,
            nice: self.nice,
            sched_idle: self.sched_idle,
            placement: self.placement,
            worker_cpus: self.worker_cpus.clone(),
            sockets,
            cores,
            smt,
            topology_error,
            memory_limit: self.memory_limit,
            threads_started: self.started.load(Ordering::Relaxed),
            thread_errors: self.errors.lock().clone(),
        }
    }
}

/// `OlapEngine::executor_report`: the executor's resources as planned at
/// start, and what its threads did when they started (they start with the
/// first analytic query).
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutorReport {
    /// Worker threads (DataFusion's `target_partitions`).
    pub threads: usize,
    /// `threads` was given in the config (`cpu_share` not used).
    pub explicit_threads: bool,
    pub cpu_share: f64,
    /// Online CPUs this process may run on.
    pub cpus: usize,
    pub nice: i32,
    /// SCHED_IDLE instead of `nice`.
    pub sched_idle: bool,
    pub placement: Placement,
    /// Worker i's CPU (None: not pinned).
    pub worker_cpus: Vec<Option<usize>>,
    pub sockets: usize,
    pub cores: usize,
    pub smt: bool,
    /// Why the topology could not be read (then nothing is pinned).
    pub topology_error: Option<String>,
    pub memory_limit: Option<usize>,
    /// Executor threads started so far (workers, then any blocking thread).
    pub threads_started: usize,
    /// Threads that could not pin themselves or lower their priority.
    pub thread_errors: Vec<String>,
}

impl fmt::Display for ExecutorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "threads {}", self.threads)?;
        if self.explicit_threads {
            write!(f, " (set explicitly)")?;
        } else {
            write!(f, " (cpu_share {} of {} CPUs)", self.cpu_share, self.cpus)?;
        }
        if self.sched_idle {
            write!(f, ", SCHED_IDLE, placement {}", self.placement)?;
        } else {
            write!(f, ", nice +{}, placement {}", self.nice, self.placement)?;
        }
        if self.worker_cpus.iter().any(Option::is_some) {
            let cpus: Vec<String> =
                self.worker_cpus.iter().map(|c| c.map_or_else(|| "-".to_owned(), |c| c.to_string())).collect();
            write!(f, " (worker -> CPU: {})", cpus.join(" "))?;
        }
        match &self.topology_error {
            Some(e) => write!(f, "; topology unknown ({e})")?,
            None => write!(
                f,
                "; topology {} socket(s), {} core(s), {} CPU(s), {}",
                self.sockets,
                self.cores,
                self.cpus,
                if self.smt { "SMT" } else { "no SMT" }
            )?,
        }
        match self.memory_limit {
            Some(bytes) => write!(f, "; memory limit {}", format_bytes(bytes))?,
            None => write!(f, "; no memory limit")?,
        }
        write!(f, "; {} thread(s) started", self.threads_started)?;
        for e in &self.thread_errors {
            write!(f, "; {e}")?;
        }
        Ok(())
    }
}

/// `1MB`, `512kB`, `1000 bytes`: PostgreSQL's units where exact.
pub(crate) fn format_bytes(bytes: usize) -> String {
    for (unit, shift) in [("TB", 40), ("GB", 30), ("MB", 20), ("kB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(target_os = "linux")]
fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(std::io::Error::other("CPU id beyond cpu_set_t"));
    }
    // SAFETY: a zeroed cpu_set_t is an empty set; cpu is within it (checked
    // above); pid 0 is the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Linux keeps a nice value per thread: PRIO_PROCESS with a thread id sets
/// that thread's only. Relative to its current value (a server started
/// under `nice` keeps its offset; an unprivileged process may not go back
/// down anyway), capped at 19.
#[cfg(target_os = "linux")]
fn lower_current_thread_priority(offset: i32) -> std::io::Result<()> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as libc::id_t;
    // getpriority returns -1 both as a value and on error: errno tells.
    // SAFETY: __errno_location points at this thread's errno.
    let current = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, tid)
    };
    if current == -1 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error().is_some_and(|n| n != 0) {
            return Err(e);
        }
    }
    let target = (current + offset).min(19);
    // SAFETY: plain system call on this thread's id.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, target) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// SCHED_IDLE for the calling thread: it runs only when no other thread
/// of any priority wants the CPU. Lowering is allowed unprivileged.
#[cfg(target_os = "linux")]
fn idle_current_thread() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn idle_current_thread() -> std::io::Result<()> {
    Err(std::io::Error::other("SCHED_IDLE is implemented for Linux only"))
}

#[cfg(not(target_os = "linux"))]
fn pin_current_thread(_cpu: usize) -> std::io::Result<()> {
    Err(std::io::Error::other("pinning is implemented for Linux only"))
}

#[cfg(not(target_os = "linux"))]
fn lower_current_thread_priority(_offset: i32) -> std::io::Result<()> {
    Err(std::io::Error::other("per-thread nice is implemented for Linux only"))
}

/// The priority of the calling thread (tests check the workers').
#[cfg(all(test, feature = "datafusion", target_os = "linux"))]
pub(crate) fn current_thread_nice() -> i32 {
    // SAFETY: as in lower_current_thread_priority.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sockets` sockets of `cores` cores, `smt` threads each, numbered as
    /// Linux numbers Intel parts: first every core's first thread, socket by
    /// socket, then the second threads in the same order.
    fn synthetic(sockets: usize, cores: usize, smt: usize) -> Topology {
        let mut cpus = Vec::new();
        for t in 0..smt {
            for s in 0..sockets {
                for c in 0..cores {
                    cpus.push(Cpu { id: t * sockets * cores + s * cores + c, socket: s, core: c });
                }
            }
        }
        Topology { cpus }
    }

    fn pinned(t: &Topology, p: Placement, n: usize) -> Vec<usize> {
        place(t, p, n).into_iter().map(|c| c.unwrap()).collect()
    }

    fn socket_core(t: &Topology, cpu: usize) -> (usize, usize) {
        let c = t.cpus.iter().find(|c| c.id == cpu).unwrap();
        (c.socket, c.core)
    }

    #[test]
    fn two_sockets_with_smt() {
        // 2 sockets x 4 cores x 2 threads: cpu 0-3 socket 0's cores, 4-7
        // socket 1's, 8-15 their siblings.
        let t = synthetic(2, 4, 2);
        assert_eq!((t.sockets(), t.cores(), t.smt()), (2, 8, true));
        let rr = pinned(&t, Placement::RoundRobin, 10);
        assert_eq!(rr, [0, 4, 1, 5, 2, 6, 3, 7, 8, 12]);
        let where_rr: Vec<(usize, usize)> = rr.iter().map(|&c| socket_core(&t, c)).collect();
        assert_eq!(&where_rr[..4], [(0, 0), (1, 0), (0, 1), (1, 1)]);
        // Socket 0 full (its 4 cores, then their siblings) before socket 1.
        assert_eq!(pinned(&t, Placement::FillFirst, 10), [0, 1, 2, 3, 8, 9, 10, 11, 4, 5]);
        // Siblings first: 4 workers on 2 physical cores.
        let pack = pinned(&t, Placement::Pack, 4);
        assert_eq!(pack, [0, 8, 1, 9]);
        let mut cores: Vec<(usize, usize)> = pack.iter().map(|&c| socket_core(&t, c)).collect();
        cores.dedup();
        assert_eq!(cores, [(0, 0), (0, 1)]);
        assert_eq!(place(&t, Placement::None, 3), [None, None, None]);
    }

    #[test]
    fn two_sockets_without_smt_and_more_workers_than_cpus() {
        let t = synthetic(2, 2, 1);
        assert_eq!((t.sockets(), t.cores(), t.smt()), (2, 4, false));
        assert_eq!(pinned(&t, Placement::RoundRobin, 6), [0, 2, 1, 3, 0, 2]);
        assert_eq!(pinned(&t, Placement::FillFirst, 5), [0, 1, 2, 3, 0]);
        assert_eq!(pinned(&t, Placement::Pack, 5), [0, 1, 2, 3, 0]);
    }

    #[test]
    fn uneven_sockets_and_sparse_ids() {
        // A cpuset that left socket 0 one core and socket 1 three, with
        // AMD-style numbering (siblings adjacent) and gaps in core ids.
        let cpu = |id, socket, core| Cpu { id, socket, core };
        let t = Topology {
            cpus: vec![cpu(2, 0, 1), cpu(3, 0, 1), cpu(8, 1, 0), cpu(9, 1, 0), cpu(12, 1, 4), cpu(14, 1, 6)],
        };
        assert_eq!((t.sockets(), t.cores(), t.smt()), (2, 4, true));
        assert_eq!(pinned(&t, Placement::RoundRobin, 6), [2, 8, 12, 14, 3, 9]);
        assert_eq!(pinned(&t, Placement::FillFirst, 6), [2, 3, 8, 12, 14, 9]);
        assert_eq!(pinned(&t, Placement::Pack, 6), [2, 3, 8, 9, 12, 14]);
    }

    #[test]
    fn threads_from_the_share_unless_explicit() {
        let config = |threads, cpu_share| OlapConfig { threads, cpu_share, ..OlapConfig::default() };
        assert_eq!(executor_threads(&config(0, 0.5), 2), 1);
        assert_eq!(executor_threads(&config(0, 0.5), 16), 8);
        assert_eq!(executor_threads(&config(0, 0.3), 16), 5);
        assert_eq!(executor_threads(&config(0, 0.01), 16), 1);
        assert_eq!(executor_threads(&config(0, 1.0), 3), 3);
        assert_eq!(executor_threads(&config(6, 0.5), 2), 6);
    }

    #[test]
    fn sysfs_is_read_with_the_affinity_mask() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("online"), "0-2,4\n").unwrap();
        for (id, socket, core) in [(0, "0", "0"), (1, "0", "1"), (2, "-1", "0"), (4, "1", "0")] {
            let topology = dir.path().join(format!("cpu{id}/topology"));
            std::fs::create_dir_all(&topology).unwrap();
            std::fs::write(topology.join("physical_package_id"), format!("{socket}\n")).unwrap();
            std::fs::write(topology.join("core_id"), format!("{core}\n")).unwrap();
        }
        let t = Topology::from_sysfs(dir.path(), Some(&[0, 2, 4, 5])).unwrap();
        let cpu = |id, socket, core| Cpu { id, socket, core };
        assert_eq!(t.cpus, [cpu(0, 0, 0), cpu(2, 0, 0), cpu(4, 1, 0)]);
        assert!(Topology::from_sysfs(dir.path(), Some(&[7])).is_err());
        assert_eq!(parse_cpu_list("0-3,6,8-9").unwrap(), [0, 1, 2, 3, 6, 8, 9]);
        assert!(parse_cpu_list("0-x").is_err());
    }

    #[test]
    fn this_machine_is_read() {
        let t = Topology::read().unwrap();
        assert!(!t.cpus.is_empty() && t.sockets() >= 1 && t.cores() >= 1);
        assert_eq!(format_bytes(1 << 20), "1MB");
        assert_eq!(format_bytes(1536), "1536 bytes");
    }
}
