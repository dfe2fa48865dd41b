//! What the micro suite measures beside the workload's own counts: the
//! device under test (`/proc/diskstats`), the WAL counter of the target,
//! the CPU of this process and of the server. Every figure has a named
//! source; one that cannot be found is `None` with the reason, never a guess.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use pgtier_backend::connect::connect;
use pgtier_engine::Database;

use super::MicroError;
use crate::device::{BlockDevice, DiskCounters, DiskFigures, device_of, disk_counters};
use crate::target::{BackendSampler, DbError};
use crate::targets::postgres::{PgSampler, db_error, proc_ticks, url_is_local};

/// How long to wait, at a window's end, for the workers' server processes
/// to exit: PostgreSQL folds a backend's WAL statistics into `pg_stat_wal`
/// when it goes idle (at most once a second) or exits, so reading before
/// they have exited would miss up to a second of WAL.
const BACKEND_EXIT_WAIT: Duration = Duration::from_secs(5);
/// /metrics answers within this, or the WAL figure is reported unknown.
const METRICS_TIMEOUT: Duration = Duration::from_secs(5);
/// The metric a pgtier server exports for its WAL position, in bytes.
const METRICS_WAL_NAME: &str = "pgtier_engine_wal_end_bytes";

/// Kind of system under test, where the suite must know it (settings only
/// PostgreSQL accepts, what "backend CPU" means).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    Postgres,
    PgtierServer,
    Embedded,
}

/// Where each figure comes from, chosen once per run by the target's kind.
pub struct Probes {
    pub kind: TargetKind,
    /// The device holding the target's data, or why it is unknown.
    pub device: Result<BlockDevice, String>,
    pub wal: WalCounter,
    pub server_cpu: ServerCpu,
}

/// A counter of WAL bytes the target has written.
pub enum WalCounter {
    /// `pg_stat_wal.wal_bytes` of a PostgreSQL server (the whole cluster).
    PgStatWal {
        url: String,
    },
    /// A pgtier server's Prometheus endpoint (`[metrics] listen`).
    Metrics {
        url: String,
    },
    /// The engine in this process (`Database::stats().wal.bytes_appended`).
    Engine(Database),
    Unknown(String),
}

/// CPU of the server side.
pub enum ServerCpu {
    /// PostgreSQL's processes, by [`PgSampler`] (the postmaster and its
    /// children; local servers only).
    Postgres {
        url: String,
        local: bool,
    },
    /// One local server process, all its threads.
    Process {
        pid: u32,
    },
    /// The engine runs in this process: its CPU is the process's.
    InProcess,
    Unknown(String),
}

impl Probes {
    /// PostgreSQL by URL: WAL from `pg_stat_wal`, CPU of its processes when
    /// local, the device of `SHOW data_directory` when local (else `device`).
    pub fn postgres(url: &str, device: Option<&Path>) -> Probes {
        let local = url_is_local(url);
        let device = match device {
            Some(path) => device_of(path),
            None if local => match show_data_directory(url) {
                Ok(dir) => device_of(Path::new(&dir)),
                Err(e) => Err(format!("SHOW data_directory: {e}; pass --device")),
            },
            None => Err("remote server; pass --device".to_owned()),
        };
        Probes {
            kind: TargetKind::Postgres,
            device,
            wal: WalCounter::PgStatWal { url: url.to_owned() },
            server_cpu: ServerCpu::Postgres { url: url.to_owned(), local },
        }
    }

    /// A pgtier server by URL: WAL from its `/metrics` when `metrics_url` is
    /// given, CPU of the process listening on the URL's port when local.
    /// It does not report its data directory: the device is `device`'s.
    pub fn pgtier_server(url: &str, metrics_url: Option<&str>, device: Option<&Path>) -> Probes {
        let device = match device {
            Some(path) => device_of(path),
            None => Err("the pgtier server does not report its data directory; pass --device".to_owned()),
        };
        let wal = match metrics_url {
            Some(m) => WalCounter::Metrics { url: m.to_owned() },
            None => WalCounter::Unknown("pass --metrics-url (the server's [metrics] listen)".to_owned()),
        };
        let server_cpu = if url_is_local(url) {
            match listener_pid(url) {
                Some(pid) => ServerCpu::Process { pid },
                None => ServerCpu::Unknown("no local process found listening on the URL's address".to_owned()),
            }
        } else {
            ServerCpu::Unknown("remote server".to_owned())
        };
        Probes { kind: TargetKind::PgtierServer, device, wal, server_cpu }
    }

    /// The engine in this process, its data in `dir` (or on `device`).
    pub fn embedded(db: &Database, dir: &Path, device: Option<&Path>) -> Probes {
        Probes {
            kind: TargetKind::Embedded,
            device: device_of(device.unwrap_or(dir)),
            wal: WalCounter::Engine(db.clone()),
            server_cpu: ServerCpu::InProcess,
        }
    }

    pub fn describe_wal(&self) -> String {
        match &self.wal {
            WalCounter::PgStatWal { .. } => "pg_stat_wal.wal_bytes (whole cluster)".to_owned(),
            WalCounter::Metrics { url } => format!("{METRICS_WAL_NAME} of {url}"),
            WalCounter::Engine(_) => "engine WAL bytes appended (this process)".to_owned(),
            WalCounter::Unknown(why) => format!("unknown: {why}"),
        }
    }

    pub fn describe_server_cpu(&self) -> String {
        match &self.server_cpu {
            ServerCpu::Postgres { local: true, .. } => "PostgreSQL's processes (/proc)".to_owned(),
            ServerCpu::Postgres { local: false, .. } => "unknown: remote server".to_owned(),
            ServerCpu::Process { pid } => format!("server process {pid} (/proc)"),
            ServerCpu::InProcess => "in this process (embedded)".to_owned(),
            ServerCpu::Unknown(why) => format!("unknown: {why}"),
        }
    }

    pub fn describe_device(&self) -> String {
        match &self.device {
            Ok(d) => format!("{} ({})", d.name, d.found_from),
            Err(why) => format!("unknown: {why}"),
        }
    }

    /// Prepares a window before the workers connect: the connection that
    /// will read `pg_stat_wal` counts the client backends already there, so
    /// that at the window's end it can wait for the workers' to be gone.
    pub(crate) fn open(&self) -> Result<Window, MicroError> {
        let wal_session = match &self.wal {
            WalCounter::PgStatWal { url } => Some(PgStatSession::open(url)?),
            _ => None,
        };
        Ok(Window {
            started: Instant::now(),
            self_ticks: 0,
            server_start: None,
            pg_sampler: None,
            wal_session,
            wal_start: None,
            disk_start: None,
        })
    }

    /// Starts measuring `w` (the workers are connected and about to go).
    pub(crate) fn start(&self, w: &mut Window) -> Result<(), MicroError> {
        if let ServerCpu::Postgres { url, local: true } = &self.server_cpu {
            let mut sampler = PgSampler::new(url.clone(), true);
            sampler.start().map_err(MicroError::Probe)?;
            w.pg_sampler = Some(sampler);
        }
        w.wal_start = self.read_wal(w.wal_session.as_mut())?;
        w.disk_start = self.device.as_ref().ok().map(disk_counters).transpose().map_err(probe_error)?;
        w.server_start = match &self.server_cpu {
            ServerCpu::Process { pid } => proc_ticks(*pid).map(|t| t.own),
            _ => None,
        };
        w.self_ticks = self_ticks();
        w.started = Instant::now();
        Ok(())
    }

    /// Ends a window: the figures over it.
    pub(crate) fn finish(&self, mut w: Window) -> Result<WindowFigures, MicroError> {
        let window_s = w.started.elapsed().as_secs_f64().max(1e-9);
        let self_ticks = self_ticks().saturating_sub(w.self_ticks);
        let per_s = crate::cpu::clock_ticks_per_s() * window_s;
        let process_cpu_percent = 100.0 * self_ticks as f64 / per_s;
        let mut wal_lsn_bytes = None;
        let server_cpu_percent = match (&self.server_cpu, &mut w.pg_sampler) {
            (ServerCpu::Postgres { .. }, Some(s)) => {
                let sampled = s.finish().map_err(MicroError::Probe)?;
                wal_lsn_bytes = Some(sampled.wal_bytes);
                sampled.cpu_percent
            }
            (ServerCpu::Process { pid }, _) => match (proc_ticks(*pid), w.server_start) {
                (Some(now), Some(start)) => Some(100.0 * now.own.saturating_sub(start) as f64 / per_s),
                _ => None,
            },
            (ServerCpu::InProcess, _) => Some(process_cpu_percent),
            _ => None,
        };
        let disk = match (&self.device, &w.disk_start) {
            (Ok(device), Some(start)) => {
                let end = disk_counters(device).map_err(probe_error)?;
                Some(DiskFigures::between(start, &end, window_s))
            }
            _ => None,
        };
        // Measured after the workers' sessions are gone (see BACKEND_EXIT_WAIT),
        // over a window that ended when they did.
        if let Some(session) = &mut w.wal_session {
            session.wait_for_workers_to_exit()?;
        }
        let wal_end = self.read_wal(w.wal_session.as_mut())?;
        let wal_bytes = match (w.wal_start, wal_end) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        Ok(WindowFigures { window_s, process_cpu_percent, server_cpu_percent, disk, wal_bytes, wal_lsn_bytes })
    }

    fn read_wal(&self, session: Option<&mut PgStatSession>) -> Result<Option<u64>, MicroError> {
        match (&self.wal, session) {
            (WalCounter::PgStatWal { .. }, Some(s)) => s.wal_bytes().map(Some),
            (WalCounter::Metrics { url }, _) => metrics_wal_bytes(url).map(Some),
            (WalCounter::Engine(db), _) => Ok(Some(db.stats().wal.bytes_appended)),
            _ => Ok(None),
        }
    }
}

/// A window being measured.
pub(crate) struct Window {
    started: Instant,
    self_ticks: u64,
    server_start: Option<u64>,
    pg_sampler: Option<PgSampler>,
    wal_session: Option<PgStatSession>,
    wal_start: Option<u64>,
    disk_start: Option<DiskCounters>,
}

/// What [`Probes::finish`] measured over one window.
#[derive(Clone, Debug, Default)]
pub(crate) struct WindowFigures {
    pub window_s: f64,
    pub process_cpu_percent: f64,
    pub server_cpu_percent: Option<f64>,
    pub disk: Option<DiskFigures>,
    pub wal_bytes: Option<u64>,
    /// PostgreSQL: the WAL position's advance over the sampler's window, a
    /// cross-check of `pg_stat_wal` (which backends report late).
    pub wal_lsn_bytes: Option<u64>,
}

fn probe_error(message: String) -> MicroError {
    MicroError::Probe(DbError::new(None, message))
}

fn show_data_directory(url: &str) -> Result<String, DbError> {
    let mut client = connect(url).map_err(|e| DbError::new(Some(e.sqlstate()), e.to_string()))?;
    let row = client.query_one("SHOW data_directory", &[]).map_err(|e| db_error(&e))?;
    row.try_get::<_, String>(0).map_err(|e| db_error(&e))
}

fn self_ticks() -> u64 {
    proc_ticks(std::process::id()).map_or(0, |t| t.own)
}

/// A connection that reads `pg_stat_wal` and waits for the workers'
/// backends to exit.
struct PgStatSession {
    client: postgres::Client,
    /// Other client backends of the database when the window was opened,
    /// before its workers connected.
    others_before: i64,
}

const OTHER_BACKENDS_SQL: &str = "SELECT count(*)::int8 FROM pg_stat_activity \
    WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database()";

impl PgStatSession {
    fn open(url: &str) -> Result<PgStatSession, MicroError> {
        let mut client =
            connect(url).map_err(|e| MicroError::Probe(DbError::new(Some(e.sqlstate()), e.to_string())))?;
        let others_before = Self::others(&mut client)?;
        Ok(PgStatSession { client, others_before })
    }

    fn others(client: &mut postgres::Client) -> Result<i64, MicroError> {
        let row = client.query_one(OTHER_BACKENDS_SQL, &[]).map_err(|e| MicroError::Probe(db_error(&e)))?;
        row.try_get(0).map_err(|e| MicroError::Probe(db_error(&e)))
    }

    fn wal_bytes(&mut self) -> Result<u64, MicroError> {
        // Statistics are read per transaction; each autocommit query sees fresh ones.
        let row = self
            .client
            .query_one("SELECT wal_bytes::int8 FROM pg_stat_wal", &[])
            .map_err(|e| MicroError::Probe(db_error(&e)))?;
        let bytes: i64 = row.try_get(0).map_err(|e| MicroError::Probe(db_error(&e)))?;
        Ok(bytes.max(0) as u64)
    }

    /// Waits, at most [`BACKEND_EXIT_WAIT`], until no more client backends
    /// are left than before the workers connected (someone else's session
    /// that ends meanwhile only shortens the wait).
    fn wait_for_workers_to_exit(&mut self) -> Result<(), MicroError> {
        let deadline = Instant::now() + BACKEND_EXIT_WAIT;
        while Self::others(&mut self.client)? > self.others_before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

/// `pgtier_engine_wal_end_bytes` from a pgtier server's `/metrics`.
fn metrics_wal_bytes(url: &str) -> Result<u64, MicroError> {
    let body = http_get(url).map_err(|e| MicroError::Probe(DbError::new(None, format!("GET {url}: {e}"))))?;
    body.lines()
        .find_map(|l| l.strip_prefix(METRICS_WAL_NAME)?.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .ok_or_else(|| MicroError::Probe(DbError::new(None, format!("{url} has no {METRICS_WAL_NAME}"))))
}

/// A plain HTTP/1.1 GET of `http://host:port/path` (the metrics endpoint
/// closes the connection after its answer).
fn http_get(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("http://").ok_or("only http:// URLs")?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/metrics".to_owned()), |(a, p)| (a, format!("/{p}")));
    let addr =
        std::net::ToSocketAddrs::to_socket_addrs(authority).map_err(|e| e.to_string())?.next().ok_or("no address")?;
    let mut tcp = TcpStream::connect_timeout(&addr, METRICS_TIMEOUT).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(METRICS_TIMEOUT)).map_err(|e| e.to_string())?;
    write!(tcp, "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    tcp.take(16 << 20).read_to_string(&mut answer).map_err(|e| e.to_string())?;
    let (head, body) = answer.split_once("\r\n\r\n").ok_or("no HTTP answer")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(head.lines().next().unwrap_or("").to_owned());
    }
    Ok(body.to_owned())
}

/// The local process listening on `url`'s TCP port or Unix socket, found
/// through the socket's inode in /proc/net and the processes' open files.
fn listener_pid(url: &str) -> Option<u32> {
    let config: postgres::Config = url.parse().ok()?;
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let mut inodes = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is ADDR:PORT in hex; state 0A is LISTEN.
            let listening = f.get(3) == Some(&"0A");
            let on_port =
                f.get(1).and_then(|a| a.rsplit(':').next()).and_then(|p| u16::from_str_radix(p, 16).ok()) == Some(port);
            if listening
                && on_port
                && let Some(inode) = f.get(9)
            {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    for host in config.get_hosts() {
        if let postgres::config::Host::Unix(dir) = host {
            let socket = dir.join(format!(".s.PGSQL.{port}"));
            let text = std::fs::read_to_string("/proc/net/unix").ok()?;
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.get(7).is_some_and(|p| Path::new(p) == socket)
                    && let Some(inode) = f.get(6)
                {
                    inodes.push(format!("socket:[{inode}]"));
                }
            }
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let own = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if pid == own {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path())
                && inodes.iter().any(|i| link.as_os_str() == i.as_str())
            {
                return Some(pid);
            }
        }
    }
    None
}
