//! Private PostgreSQL clusters for tests and benchmarks.
//!
//! A [`PrivateCluster`] is a `postgres` server running as a child process of
//! the thread that started it, on a loopback port of its own, in a directory
//! of its own. It dies with its owner:
//! - dropped (also while a test panics): fast shutdown, then SIGKILL if the
//!   server has not exited within [`SHUTDOWN_TIMEOUT_MS`];
//! - owner killed (even by SIGKILL): the kernel sends the server SIGKILL
//!   (`PR_SET_PDEATHSIG`), and its backends exit on postmaster death.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that spawned the server exits,
//! not the process. A `PrivateCluster` must therefore stay owned by the
//! thread that started it for its whole life: do not start one on a helper
//! thread and hand it to another, nor keep one in a static (one cluster per
//! test is the intended use). For one server per test binary use
//! [`shared_cluster`], which starts it on a thread that never exits.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant, SystemTime};

use std::os::unix::process::CommandExt;

pub use crate::binaries::{find_server_binaries, find_server_binaries_from};
use crate::cluster::{self, Layout, StartConfig};
use crate::connect::redact_password;
pub use crate::error::HarnessError;
use crate::memory_limit::MemoryCgroup;
use crate::os_user::RunAs;
use crate::read_throttle::{Disk, ReadThrottle, ReadThrottleError};
pub use crate::shared::shared_cluster;

/// How long a start may take before we give up and show the server log.
pub const START_TIMEOUT_MS: u64 = 30_000;
/// How long a fast shutdown may take before the server is killed.
pub const SHUTDOWN_TIMEOUT_MS: u64 = 10_000;
/// Attempts at a fresh port when another process takes the one we picked.
const PORT_ATTEMPTS_MAX: u32 = 8;
/// Names private cluster directories, so abandoned ones can be recognised.
const PRIVATE_DIR_PREFIX: &str = "pgtier-cluster-";
/// A RAM-backed directory must have this much room to hold test clusters.
const RAM_DIR_FREE_BYTES_MIN: u64 = 2 << 30;
/// Private directories younger than this are never swept: their owner may
/// still be copying the template, before any postmaster.pid exists.
const ABANDONED_AGE_MIN: Duration = Duration::from_secs(15 * 60);

/// `Default`: private temp dir, free port, no fsync, trust auth, no extra settings.
#[derive(Clone, Default)]
pub struct ClusterOptions {
    /// None = private temp dir, removed on drop: in RAM (/dev/shm) when
    /// `fsync` is off and there is room, else in the temp dir;
    /// `PGTIER_CLUSTER_TMPDIR` overrides both. Some = the cluster lives
    /// (and stays) there; an existing data directory in it is reused.
    pub dir: Option<PathBuf>,
    /// None = pick a free loopback port.
    pub port: Option<u16>,
    /// Tests: false; benchmarks: true.
    pub fsync: bool,
    /// None = trust auth; Some = scram-sha-256 for TCP, and the superuser
    /// "postgres" gets this password.
    pub password: Option<String>,
    /// Extra postgresql.conf settings, applied after (so overriding) ours.
    pub settings: Vec<(String, String)>,
    /// Some = the server and everything it forks run in a memory cgroup of
    /// this many bytes, which bounds its page cache too
    /// ([`crate::memory_limit`]); where no cgroup can be made the server
    /// runs unlimited and [`PrivateCluster::memory_limit`] says why.
    pub memory_limit: Option<u64>,
    /// Networks (CIDR, e.g. "10.213.0.0/30") that may connect over TCP
    /// besides loopback, with the same authentication; the server must
    /// also listen there (`listen_addresses` in `settings`). Tests that put
    /// a client in a network namespace need it.
    pub client_networks: Vec<String>,
}

/// By hand: the password is shown only as present or absent.
impl std::fmt::Debug for ClusterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterOptions")
            .field("dir", &self.dir)
            .field("port", &self.port)
            .field("fsync", &self.fsync)
            .field("password", &redact_password(&self.password))
            .field("settings", &self.settings)
            .field("memory_limit", &self.memory_limit)
            .field("client_networks", &self.client_networks)
            .finish()
    }
}

impl ClusterOptions {
    /// Durable, tuned for the benchmark machine (2 cores, 24 GiB, flash):
    /// the PostgreSQL-alone baseline every ratio is measured against, so it
    /// must be a fair, production-like configuration, not a crippled one.
    pub fn for_benchmark() -> ClusterOptions {
        let settings = [
            ("synchronous_commit", "on"),
            ("shared_buffers", "2GB"),
            ("effective_cache_size", "8GB"),
            ("work_mem", "16MB"),
            ("maintenance_work_mem", "512MB"),
            ("max_connections", "300"),
            ("max_wal_size", "8GB"),
            ("min_wal_size", "1GB"),
            ("checkpoint_timeout", "30min"),
            ("checkpoint_completion_target", "0.9"),
            ("wal_buffers", "64MB"),
            ("wal_level", "logical"),
            ("max_wal_senders", "10"),
            ("max_replication_slots", "10"),
            ("random_page_cost", "1.1"),
            ("effective_io_concurrency", "200"),
            ("track_io_timing", "on"),
            ("log_checkpoints", "on"),
        ];
        ClusterOptions {
            fsync: true,
            settings: settings.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect(),
            ..ClusterOptions::default()
        }
    }
}

/// A running private PostgreSQL server; see the module docs for its lifetime rules.
pub struct PrivateCluster {
    layout: Layout,
    port: u16,
    password: Option<String>,
    /// None once shut down.
    child: Option<Child>,
    pid: u32,
    /// Some for a private temp dir, removed after shutdown.
    temp_root: Option<tempfile::TempDir>,
    /// The memory cgroup asked for by [`ClusterOptions::memory_limit`], or
    /// why there is none. Declared after `child`: dropped after shutdown.
    memory: MemoryLimitState,
    /// The ceiling on reads from the data directory's disk
    /// ([`Self::throttle_reads`]). Declared after `memory`: in cgroup v2 it
    /// may live in that cgroup, and lifts its ceiling before it goes.
    read_throttle: Option<ReadThrottle>,
}

/// What became of [`ClusterOptions::memory_limit`].
#[derive(Debug)]
enum MemoryLimitState {
    NotAsked,
    Applied(MemoryCgroup),
    Unavailable(String),
}

/// By hand: the password is shown only as present or absent.
impl std::fmt::Debug for PrivateCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateCluster")
            .field("layout", &self.layout)
            .field("port", &self.port)
            .field("password", &redact_password(&self.password))
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl PrivateCluster {
    pub fn start(options: ClusterOptions) -> Result<PrivateCluster, HarnessError> {
        let bin_dir = find_server_binaries()?;
        let run_as = RunAs::from_env()?;
        if options.password.as_deref() == Some("") {
            return Err(HarnessError::InvalidOption("empty password".to_owned()));
        }
        let (root, temp_root) = match &options.dir {
            Some(dir) => (absolute(dir)?, None),
            None => {
                let base = private_base_dir(options.fsync);
                sweep_abandoned_dirs_once(&base);
                let temp = tempfile::Builder::new()
                    .prefix(PRIVATE_DIR_PREFIX)
                    .tempdir_in(&base)
                    .map_err(|error| HarnessError::io("create a temp dir in", &base, error))?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        let layout = Layout::new(&root, &run_as);
        layout.prepare(&bin_dir, &run_as)?;
        let mut settings = Vec::with_capacity(options.settings.len() + 1);
        if temp_root.is_some() && is_tmpfs(&root) {
            // POSIX segments live in /dev/shm and outlive a SIGKILLed server;
            // mmap segments live in the data directory, which we remove.
            settings.push(("dynamic_shared_memory_type".to_owned(), "mmap".to_owned()));
        }
        settings.extend(options.settings.iter().cloned());
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = match options.port {
                Some(port) => port,
                None => cluster::pick_free_port()?,
            };
            let start = StartConfig {
                port,
                fsync: options.fsync,
                password_required: options.password.is_some(),
                settings: &settings,
                client_networks: &options.client_networks,
            };
            layout.write_config(&start, &run_as)?;
            match spawn_and_wait(&bin_dir, &run_as, &layout, port) {
                Ok(child) => {
                    let pid = child.id();
                    let mut cluster = PrivateCluster {
                        layout,
                        port,
                        password: options.password.clone(),
                        child: Some(child),
                        pid,
                        temp_root,
                        memory: MemoryLimitState::NotAsked,
                        read_throttle: None,
                    };
                    // Any error from here on drops `cluster`, which stops the server.
                    if let Some(bytes) = options.memory_limit {
                        cluster.limit_memory(bytes);
                    }
                    if let Some(password) = &options.password {
                        cluster.layout.set_password(port, password)?;
                    }
                    return Ok(cluster);
                }
                Err(SpawnError::PortTaken { .. }) if options.port.is_none() && attempt < PORT_ATTEMPTS_MAX => {}
                Err(SpawnError::PortTaken { error } | SpawnError::Fatal { error }) => {
                    layout.remove_separate_socket_dir();
                    return Err(error);
                }
            }
        }
    }

    /// postgres://postgres[:pw]@127.0.0.1:PORT/postgres
    pub fn url(&self) -> String {
        self.url_for_database("postgres")
    }

    pub fn url_for_database(&self, db: &str) -> String {
        cluster::url(self.port, self.password.as_deref(), db)
    }

    /// Creates database `name` and returns its URL.
    pub fn create_database(&self, name: &str) -> Result<String, HarnessError> {
        self.layout.create_database(self.port, name)?;
        Ok(self.url_for_database(name))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn data_dir(&self) -> &Path {
        &self.layout.data_dir
    }

    /// The directory of the server's Unix socket (`.s.PGSQL.PORT`), for
    /// `host=DIR` connections.
    pub fn socket_dir(&self) -> &Path {
        &self.layout.socket_dir
    }

    /// The server's log file (useful in test failure messages).
    pub fn log_file(&self) -> &Path {
        &self.layout.log_file
    }

    pub fn postmaster_pid(&self) -> u32 {
        self.pid
    }

    /// The memory cgroup the server runs in, or why it runs without one
    /// (`Err`: a limit was asked for and could not be applied; `Ok(None)`:
    /// none was asked for).
    pub fn memory_limit(&self) -> Result<Option<&MemoryCgroup>, &str> {
        match &self.memory {
            MemoryLimitState::NotAsked => Ok(None),
            MemoryLimitState::Applied(cgroup) => Ok(Some(cgroup)),
            MemoryLimitState::Unavailable(reason) => Err(reason),
        }
    }

    /// Moves the running server (and what it forks from now on) into a
    /// memory cgroup of `bytes`, replacing any limit before; where none can
    /// be made it runs unlimited and [`Self::memory_limit`] says why.
    /// Memory the server touched before stays charged where it was: a
    /// population run before the limit leaves its pages behind, so
    /// [`Self::stop_fast`] + [`Self::restart`] (the new server is adopted
    /// at start) and [`Self::checkpoint_and_evict_page_cache`] follow.
    pub fn limit_memory(&mut self, bytes: u64) {
        self.memory = MemoryLimitState::NotAsked;
        self.memory = match MemoryCgroup::create(bytes) {
            Ok(cgroup) => match cgroup.adopt_process_tree(self.pid) {
                Ok(_) => MemoryLimitState::Applied(cgroup),
                Err(error) => MemoryLimitState::Unavailable(error.to_string()),
            },
            Err(error) => MemoryLimitState::Unavailable(error.to_string()),
        };
    }

    /// The memory cgroup, to change its limit; None when there is none.
    pub fn memory_limit_mut(&mut self) -> Option<&mut MemoryCgroup> {
        match &mut self.memory {
            MemoryLimitState::Applied(cgroup) => Some(cgroup),
            _ => None,
        }
    }

    /// Holds the server's reads from its data directory's disk to
    /// `read_iops` a second (slower primary storage, emulated: see
    /// [`crate::read_throttle`]), replacing any ceiling before; the
    /// server's later processes and a restarted server are held too.
    /// Applied after [`Self::limit_memory`] in cgroup v2, where both must
    /// share one cgroup.
    pub fn throttle_reads(&mut self, read_iops: u64) -> Result<&ReadThrottle, ReadThrottleError> {
        self.read_throttle = None;
        let disk = Disk::of(&self.layout.data_dir)?;
        let throttle = match &self.memory {
            MemoryLimitState::Applied(memory) => ReadThrottle::within(memory, disk, read_iops)?,
            _ => ReadThrottle::create(disk, read_iops)?,
        };
        throttle.adopt_process_tree(self.pid)?;
        Ok(self.read_throttle.insert(throttle))
    }

    /// Lifts [`Self::throttle_reads`]'s ceiling: the server reads at the
    /// disk's own rate again (its processes leave the throttled cgroup, or
    /// the shared v2 cgroup's `io.max` rule goes). A no-op without one.
    pub fn lift_read_ceiling(&mut self) {
        self.read_throttle = None;
    }

    /// CHECKPOINT, then drops the data directory's clean pages from the
    /// page cache: what the server reads next is charged to its memory
    /// cgroup, not found in pages read before the limit applied (by a
    /// population, say). Returns the files advised.
    pub fn checkpoint_and_evict_page_cache(&self) -> Result<u64, HarnessError> {
        let mut client = crate::connect::connect(&self.url())?;
        client.batch_execute("CHECKPOINT").map_err(|error| HarnessError::sql("CHECKPOINT", &error))?;
        drop(client);
        crate::memory_limit::evict_page_cache(&self.layout.data_dir)
            .map_err(|error| HarnessError::io("evict the page cache of", &self.layout.data_dir, error))
    }

    /// Clean (fast) shutdown; reports a server that had crashed, had to be
    /// killed, or whose directory could not be removed.
    pub fn stop(mut self) -> Result<(), HarnessError> {
        self.shutdown()
    }

    /// Stops the server as `pg_ctl stop -m immediate` does (SIGQUIT: no
    /// shutdown checkpoint, crash recovery at the next start), keeping the
    /// directory for [`Self::restart`]. Crash tests of the backend side.
    pub fn stop_immediate(&mut self) -> Result<(), HarnessError> {
        self.stop_with(libc::SIGQUIT)
    }

    /// `pg_ctl stop -m fast`: SIGINT, so PostgreSQL ends its sessions and
    /// writes a shutdown checkpoint (no crash recovery at the next start);
    /// start it again with [`Self::restart`].
    pub fn stop_fast(&mut self) -> Result<(), HarnessError> {
        self.stop_with(libc::SIGINT)
    }

    fn stop_with(&mut self, signal: libc::c_int) -> Result<(), HarnessError> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        let Ok(raw_pid) = libc::pid_t::try_from(self.pid) else { return Ok(()) };
        // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
        unsafe { libc::kill(raw_pid, signal) };
        let deadline = Instant::now() + Duration::from_millis(SHUTDOWN_TIMEOUT_MS);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    // SAFETY: as above.
                    unsafe { libc::kill(raw_pid, libc::SIGKILL) };
                    let _ = child.wait();
                    return Ok(());
                }
                Err(error) => return Err(HarnessError::io("wait for", &self.layout.data_dir, error)),
            }
        }
    }

    /// Starts a server stopped by [`Self::stop_immediate`] again, on the
    /// same directory and port (it runs crash recovery first).
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        if self.child.is_some() {
            return Ok(());
        }
        let bin_dir = find_server_binaries()?;
        let run_as = RunAs::from_env()?;
        match spawn_and_wait(&bin_dir, &run_as, &self.layout, self.port) {
            Ok(child) => {
                self.pid = child.id();
                self.child = Some(child);
                if let MemoryLimitState::Applied(cgroup) = &self.memory {
                    cgroup.adopt_process_tree(self.pid)?;
                }
                if let Some(throttle) = &self.read_throttle {
                    throttle.adopt_process_tree(self.pid)?;
                }
                Ok(())
            }
            Err(SpawnError::PortTaken { error } | SpawnError::Fatal { error }) => Err(error),
        }
    }

    /// Stops the server of a cluster that can no longer be dropped (one held
    /// in a static): signals by pid and reaps with waitpid, then removes the
    /// private directory. Used at process exit, so it reports nothing.
    pub(crate) fn stop_in_place(&self) {
        let Ok(raw_pid) = libc::pid_t::try_from(self.pid) else {
            return;
        };
        let reaped = |timeout: Duration| {
            let deadline = Instant::now() + timeout;
            loop {
                let mut status = 0;
                // SAFETY: waitpid on our own child with a valid out-pointer.
                let result = unsafe { libc::waitpid(raw_pid, &mut status, libc::WNOHANG) };
                if result != 0 {
                    return true; // reaped, or not (any longer) our child
                }
                if Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
        unsafe { libc::kill(raw_pid, libc::SIGINT) };
        if !reaped(Duration::from_millis(SHUTDOWN_TIMEOUT_MS)) {
            // SAFETY: as above.
            unsafe { libc::kill(raw_pid, libc::SIGKILL) };
            reaped(Duration::from_millis(SHUTDOWN_TIMEOUT_MS));
        }
        self.layout.remove_separate_socket_dir();
        if let Some(temp) = &self.temp_root {
            for _ in 0..20 {
                if std::fs::remove_dir_all(temp.path()).is_ok() || !temp.path().exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        }
    }

    fn shutdown(&mut self) -> Result<(), HarnessError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let outcome = stop_child(&mut child, self.pid, &self.layout);
        self.layout.remove_separate_socket_dir();
        let removal = match self.temp_root.take() {
            Some(temp) => remove_temp_root(temp),
            None => Ok(()),
        };
        outcome.and(removal)
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        // Errors have nowhere to go from drop; `stop` reports them.
        let _ = self.shutdown();
    }
}

enum SpawnError {
    PortTaken { error: HarnessError },
    Fatal { error: HarnessError },
}

fn spawn_and_wait(bin_dir: &Path, run_as: &RunAs, layout: &Layout, port: u16) -> Result<Child, SpawnError> {
    let fatal = |error| SpawnError::Fatal { error };
    let log = OpenOptions::new()
        .append(true)
        .open(&layout.log_file)
        .map_err(|error| fatal(HarnessError::io("open", &layout.log_file, error)))?;
    let log_for_stderr =
        log.try_clone().map_err(|error| fatal(HarnessError::io("duplicate handle of", &layout.log_file, error)))?;
    let program = bin_dir.join("postgres");
    let mut command = run_as.command(&program);
    command
        .arg("-D")
        .arg(&layout.data_dir)
        .current_dir(&layout.root)
        .env_remove("PGDATA")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_for_stderr)
        // A terminal's Ctrl-C goes to the test process only; the server then
        // follows through the parent-death signal, not a half-done SIGINT.
        .process_group(0);
    let parent_pid = std::process::id();
    // SAFETY: the closure runs between fork and exec and only makes
    // async-signal-safe calls (prctl, getppid); it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then no signal
            // will ever come, so do not start at all.
            if u32::try_from(libc::getppid()).ok() != Some(parent_pid) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|error| fatal(HarnessError::io("start", &program, error)))?;
    let waited = layout.wait_ready(port, START_TIMEOUT_MS, || match child.try_wait() {
        Ok(None) => Ok(()),
        Ok(Some(status)) => Err(format!("postgres exited during startup ({status})")),
        Err(error) => Err(format!("cannot check on postgres: {error}")),
    });
    match waited {
        Ok(()) => Ok(child),
        Err(reason) => {
            let _ = child.kill();
            let _ = child.wait();
            let log_tail = layout.log_tail();
            let error = HarnessError::StartFailed {
                reason: format!("{reason} (port {port})"),
                log_file: layout.log_file.clone(),
                log_tail: log_tail.clone(),
            };
            if cluster::is_port_collision(&log_tail) {
                Err(SpawnError::PortTaken { error })
            } else {
                Err(SpawnError::Fatal { error })
            }
        }
    }
}

fn stop_child(child: &mut Child, pid: u32, layout: &Layout) -> Result<(), HarnessError> {
    let problem = |problem: String| HarnessError::Shutdown {
        pid,
        problem,
        log_file: layout.log_file.clone(),
        log_tail: layout.log_tail(),
    };
    match child.try_wait() {
        Ok(Some(status)) => return Err(problem(format!("had already exited ({status})"))),
        Ok(None) => {}
        Err(error) => return Err(problem(format!("cannot be checked on: {error}"))),
    }
    let Ok(raw_pid) = libc::pid_t::try_from(pid) else {
        return Err(problem("has a pid out of range".to_owned()));
    };
    // SIGINT = PostgreSQL's fast shutdown: roll back sessions, checkpoint, exit.
    // SAFETY: kill has no memory-safety preconditions; `pid` is our unreaped
    // child, so it cannot have been reused by another process.
    unsafe { libc::kill(raw_pid, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_millis(SHUTDOWN_TIMEOUT_MS);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(problem(format!("exited with {status} on fast shutdown"))),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) | Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(problem(format!("did not finish a fast shutdown within {SHUTDOWN_TIMEOUT_MS} ms and was killed")))
}

/// Backends may still be exiting (and unlinking files) just after the
/// postmaster is gone, so a removal that races them is retried briefly.
fn remove_temp_root(temp: tempfile::TempDir) -> Result<(), HarnessError> {
    let path = temp.path().to_path_buf();
    let temp = temp.keep();
    let mut last_error = None;
    for _ in 0..20 {
        match std::fs::remove_dir_all(&temp) {
            Ok(()) => return Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => last_error = Some(error),
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    match last_error {
        Some(error) => Err(HarnessError::io("remove", path, error)),
        None => Ok(()),
    }
}

fn absolute(dir: &Path) -> Result<PathBuf, HarnessError> {
    std::path::absolute(dir).map_err(|error| HarnessError::io("resolve", dir, error))
}

/// Where private cluster directories go. Without fsync nothing is durable
/// anyway, and a tmpfs makes the template copy ~10x faster than ext4 on a busy
/// machine; with fsync the cluster measures real storage, so it stays on disk.
fn private_base_dir(fsync: bool) -> PathBuf {
    if let Some(dir) = std::env::var_os("PGTIER_CLUSTER_TMPDIR").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    if !fsync && is_roomy_tmpfs(shm) {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}

fn is_roomy_tmpfs(dir: &Path) -> bool {
    let Some(stats) = statfs(dir) else {
        return false;
    };
    let Ok(path) = c_path(dir) else {
        return false;
    };
    // SAFETY: access has no memory-safety preconditions beyond a valid C string.
    let writable = unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) } == 0;
    let free_bytes = u64::try_from(stats.f_bsize).unwrap_or(0).saturating_mul(stats.f_bavail);
    stats.f_type == libc::TMPFS_MAGIC && writable && free_bytes >= RAM_DIR_FREE_BYTES_MIN
}

fn is_tmpfs(dir: &Path) -> bool {
    statfs(dir).is_some_and(|stats| stats.f_type == libc::TMPFS_MAGIC)
}

fn statfs(dir: &Path) -> Option<libc::statfs> {
    let path = c_path(dir).ok()?;
    let mut stats = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `path` is NUL-terminated and `stats` is a valid out-pointer;
    // statfs initialises it fully when it returns 0.
    unsafe {
        if libc::statfs(path.as_ptr(), stats.as_mut_ptr()) != 0 {
            return None;
        }
        Some(stats.assume_init())
    }
}

fn c_path(path: &Path) -> Result<std::ffi::CString, std::ffi::NulError> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
}

/// A test process killed by a signal runs no destructors: its server dies
/// (parent-death signal) but its directory stays, and in RAM. Once per
/// process, remove such leftovers: old private directories whose server is
/// not running.
fn sweep_abandoned_dirs_once(base: &Path) {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| {
        let Ok(entries) = std::fs::read_dir(base) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let is_ours = entry.file_name().to_string_lossy().starts_with(PRIVATE_DIR_PREFIX);
            if is_ours && is_abandoned(&path) {
                // Best effort: another process may be sweeping the same directory.
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    });
}

fn is_abandoned(root: &Path) -> bool {
    let old_enough = std::fs::symlink_metadata(root)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|age| age >= ABANDONED_AGE_MIN);
    if !old_enough {
        return false;
    }
    let pid_file = root.join("data/postmaster.pid");
    let Ok(text) = std::fs::read_to_string(&pid_file) else {
        return !pid_file.exists();
    };
    let pid = text.lines().next().and_then(|line| line.trim().parse::<u32>().ok());
    // A reused pid keeps a directory alive for nothing; that errs the safe way.
    !pid.is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}
