//! The listener and the registry of sessions: accepts connections, gives
//! each a thread for its handshake (and for its life, unless an event loop
//! adopts it: event_loop.rs), a backend key (pid, secret) for cancel
//! requests and a place in the connection limit, and on shutdown closes
//! every socket, waits for the sessions to end and closes the engine
//! (checkpoint, WAL flush).

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};
use pgtier_engine::Database;
use pgwire::messages::startup::SecretKey;
use ring::rand::{SecureRandom, SystemRandom};

use crate::auth::AuthState;
use crate::login::Logins;
use crate::{ServerConfig, ServerError};

/// How often the accept loop looks at the shutdown flag.
const ACCEPT_POLL_MS: i32 = 100;
/// Connections still in startup/authentication beyond the limit: they get
/// their "too many clients" answer; past this many more, new connections
/// are closed at once (a bound on threads).
const HANDSHAKE_SLACK: usize = 64;
/// Session and event-loop threads bind, plan and evaluate expression trees
/// recursively; pgtier-sql refuses a statement deeper than the stack left
/// allows (54001, crates/sql/src/depth.rs: 8 KiB a level after 512 KiB
/// reserved, at most 10,000 levels). 32 MiB admits about 4,000 levels,
/// more than PostgreSQL's 3,000-term `+` chains. Only the pages touched
/// are committed, so an idle session costs no more than with a small stack.
pub(crate) const SESSION_STACK_BYTES: usize = 32 << 20;

struct SessionEntry {
    secret: i32,
    cancel: Arc<AtomicBool>,
    /// A handle to the socket, so shutdown can wake a blocked read.
    socket: Option<TcpStream>,
}

pub struct Shared {
    pub db: Database,
    /// Users, host rules, failure delay: replaced whole by a reload.
    auth: RwLock<Arc<AuthState>>,
    /// Login figures and each user's live sessions.
    pub logins: Arc<Logins>,
    /// The configuration in force (a reload compares the file with it)
    /// and its listen address as configured; the lock serializes reloads.
    config: Mutex<ServerConfig>,
    listen: SocketAddr,
    pub(crate) reloads: [std::sync::atomic::AtomicU64; 2],
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub max_connections: usize,
    pub max_message_bytes: usize,
    /// Backend connections for statements on tables pgtier does not hold
    /// (None: passthrough off).
    pub passthrough: Option<Arc<crate::passthrough::Pool>>,
    /// The cache groups every session's statements and views reach.
    /// Set once: at start, or when a standby is promoted.
    pub cache: std::sync::OnceLock<Arc<pgtier_cache::Cache>>,
    /// `[replication]` (None: off).
    pub(crate) replication: Option<Arc<crate::replication::Replication>>,
    /// Where `GET /metrics` answers (`[metrics] listen`).
    pub metrics_addr: Option<SocketAddr>,
    /// `[settings]`: defaults every session starts with (checked at start).
    /// `[settings]`: what a new session starts with (a reload replaces it).
    pub setting_defaults: RwLock<Arc<Vec<(String, String)>>>,
    /// `[log]`: which session events are logged (a reload replaces it).
    pub log: RwLock<crate::logging::LogSettings>,
    shutdown: AtomicBool,
    /// Authenticated (or authenticating) sessions, against max_connections.
    pub(crate) active: AtomicUsize,
    sessions: Mutex<HashMap<i32, SessionEntry>>,
    /// Sessions alive (in a thread or an event loop); shutdown waits for 0.
    threads: Mutex<usize>,
    threads_done: Condvar,
    next_pid: AtomicI32,
    /// Sessions ended by a panic (a bug; caught so only that session ends).
    pub(crate) session_panics: std::sync::atomic::AtomicU64,
    /// The event loops plain-TCP sessions move to after their handshake
    /// (unset: a thread per session).
    pub(crate) loops: std::sync::OnceLock<Arc<crate::event_loop::Loops>>,
}

/// What a reload did.
#[derive(Debug)]
pub struct Reloaded {
    /// The file read.
    pub path: std::path::PathBuf,
    /// Keys that changed in the file and keep their old values until a restart.
    pub restart_needed: Vec<&'static str>,
}

/// A place in the connection limit, released on drop.
pub struct Slot(Arc<Shared>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Shared {
    pub fn new(
        db: Database,
        auth: AuthState,
        config: ServerConfig,
        listen: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Shared {
        let (max_connections, max_message_bytes) = (config.max_connections, config.max_message_bytes);
        Shared {
            db,
            auth: RwLock::new(Arc::new(auth)),
            logins: Arc::new(Logins::default()),
            config: Mutex::new(config),
            listen,
            reloads: Default::default(),
            tls,
            max_connections,
            max_message_bytes,
            passthrough: None,
            cache: std::sync::OnceLock::new(),
            replication: None,
            metrics_addr: None,
            setting_defaults: RwLock::new(Arc::new(Vec::new())),
            log: RwLock::new(crate::logging::LogSettings::default()),
            shutdown: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            sessions: Mutex::new(HashMap::new()),
            threads: Mutex::new(0),
            threads_done: Condvar::new(),
            next_pid: AtomicI32::new(1),
            session_panics: std::sync::atomic::AtomicU64::new(0),
            loops: std::sync::OnceLock::new(),
        }
    }

    /// `[settings]` of the configuration in force.
    pub(crate) fn config_setting_defaults(&self) -> Vec<(String, String)> {
        self.config.lock().setting_defaults()
    }

    /// A standby was promoted (by `pg_promote()` or the lease): its cache
    /// serves, and new sessions start read-write (those open keep the
    /// settings they read at their start).
    pub(crate) fn promoted(&self, cache: Option<Arc<pgtier_cache::Cache>>) {
        if let Some(cache) = cache {
            let _ = self.cache.set(cache);
        }
        self.set_read_only(false);
    }

    /// New sessions start read-only (a standby, a fenced active) or not,
    /// as drivers' `target_session_attrs` read it.
    pub(crate) fn set_read_only(&self, read_only: bool) {
        let mut defaults = self.config_setting_defaults();
        if read_only {
            defaults.push(("default_transaction_read_only".into(), "on".into()));
            defaults.push(("transaction_read_only".into(), "on".into()));
        }
        *self.setting_defaults.write() = Arc::new(defaults);
    }

    /// Who may connect and how, now (a new connection keeps what it got).
    pub fn auth(&self) -> Arc<AuthState> {
        Arc::clone(&self.auth.read())
    }

    /// Reads the configuration file again: `[auth]` (users, passwords,
    /// rules, failure delay, connection limits) applies to new connections
    /// at once, `[settings]` to new sessions, `[log]` (but its format) and
    /// `[cache]`'s tuning (memory budget and watermarks, aging interval,
    /// load_parallel, write-through's and autorefresh's bounds and delays)
    /// at their next use; any other key that changed keeps its old value
    /// until a restart and is named on stderr. A file that does not load or check
    /// changes nothing; the error says why (and goes to stderr too).
    pub fn reload(&self) -> Result<Reloaded, ServerError> {
        let result = self.reload_inner();
        // reloads[0]: ok, [1]: failed.
        self.reloads[usize::from(result.is_err())].fetch_add(1, Ordering::Relaxed);
        match &result {
            Ok(r) => {
                for key in &r.restart_needed {
                    eprintln!(
                        "pgtier: warning: {key} changed in {}; it needs a restart, the old value stays in force",
                        r.path.display()
                    );
                }
                eprintln!("pgtier: configuration reloaded from {}", r.path.display());
            }
            Err(e) => eprintln!("pgtier: reload failed, the old configuration stays in force: {e}"),
        }
        result
    }

    fn reload_inner(&self) -> Result<Reloaded, ServerError> {
        let mut current = self.config.lock();
        let Some(path) = current.source.clone() else {
            return Err(ServerError::Config("the server was not started from a file: nothing to reload".to_owned()));
        };
        let new = ServerConfig::from_toml_file(&path)?;
        let restart_needed = current.restart_keys(&new);
        let mut merged = current.clone();
        merged.auth = new.auth;
        merged.settings = new.settings;
        merged.log.level = new.log.level;
        merged.log.log_min_duration_statement = new.log.log_min_duration_statement;
        merged.log.log_statement_parameters = new.log.log_statement_parameters;
        merged.log.log_connections = new.log.log_connections;
        merged.log.log_disconnections = new.log.log_disconnections;
        merged.log.log_error_detail = new.log.log_error_detail;
        merged.cache = current.cache.live_keys_of(&new.cache);
        // Everything is checked before anything changes.
        let tuning = pgtier_cache::Tuning::of(&merged.cache.to_cache_config()?);
        let state = AuthState::new(&merged, self.listen, Some(&self.auth()))?;
        let mut log = merged.log.settings()?;
        log.format = self.log.read().format;
        let defaults = merged.setting_defaults();
        let mut probe = pgtier_sql::Connection::new(self.db.clone());
        for (name, value) in &defaults {
            probe
                .set_setting_default(name, value)
                .map_err(|e| ServerError::Config(format!("[settings] {name}: {}", e.message)))?;
        }
        drop(probe);
        crate::register_users(&self.db, &merged)?;
        if let Some(cache) = self.cache.get() {
            cache.retune(tuning).map_err(|e| ServerError::Config(format!("[cache] {e}")))?;
        }
        *self.auth.write() = Arc::new(state);
        *self.setting_defaults.write() = Arc::new(defaults);
        crate::logging::set_level(log.level);
        *self.log.write() = log;
        tracing::info!(path = %path.display(), restart_needed = ?restart_needed, "configuration reloaded");
        *current = merged;
        Ok(Reloaded { path, restart_needed })
    }

    pub fn reserve_connection(self: &Arc<Self>) -> Option<Slot> {
        let before = self.active.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(self.clone());
        (before < self.max_connections).then_some(slot)
    }

    /// A CancelRequest: flags the session whose key matches; a wrong key
    /// is ignored silently, as PostgreSQL does.
    pub fn cancel(&self, pid: i32, secret: &SecretKey) {
        if let Some(s) = self.sessions.lock().get(&pid)
            && secret.eq_value(&SecretKey::I32(s.secret))
        {
            s.cancel.store(true, Ordering::Release);
        }
    }

    pub fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }
}

fn random_i32() -> i32 {
    let mut b = [0u8; 4];
    // Without randomness the key is still unique per session (pid), only
    // guessable; cancel is harmless enough that this is no reason to fail.
    let _ = SystemRandom::new().fill(&mut b);
    i32::from_ne_bytes(b)
}

/// A session's place in the registry, released on drop (by its thread, or
/// by the event loop that adopted it).
pub struct Registered {
    shared: Arc<Shared>,
    pid: i32,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.shared.sessions.lock().remove(&self.pid);
        let mut n = self.shared.threads.lock();
        *n -= 1;
        self.shared.threads_done.notify_all();
    }
}

fn spawn_session(shared: &Arc<Shared>, tcp: TcpStream) {
    {
        let mut n = shared.threads.lock();
        if *n >= shared.max_connections + HANDSHAKE_SLACK {
            // Dropping closes the socket: the cheapest answer to a flood.
            return;
        }
        *n += 1;
    }
    let _ = tcp.set_nonblocking(false);
    let pid = shared.next_pid.fetch_add(1, Ordering::Relaxed);
    let secret = random_i32();
    let cancel = Arc::new(AtomicBool::new(false));
    shared.sessions.lock().insert(pid, SessionEntry { secret, cancel: cancel.clone(), socket: tcp.try_clone().ok() });
    let s = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("pgtier-session-{pid}"))
        .stack_size(SESSION_STACK_BYTES)
        .spawn(move || {
            // Deregisters even if the session panics (a bug): the registry's
            // socket handle is closed and shutdown does not wait forever.
            let registered = Registered { shared: s.clone(), pid };
            // A panic is a bug, but it must end only this session.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::session::serve(&s, tcp, pid, secret, cancel, registered)
            }))
            .is_err()
            {
                s.session_panics.fetch_add(1, Ordering::Relaxed);
            }
        });
    if spawned.is_err() {
        shared.sessions.lock().remove(&pid);
        *shared.threads.lock() -= 1;
    }
}

/// Waits until the listener is readable or the poll interval passes.
pub(crate) fn wait_readable(listener: &TcpListener) {
    let mut fds = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe {
        libc::poll(&mut fds, 1, ACCEPT_POLL_MS);
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) -> Result<(), ServerError> {
    while !shared.is_shutting_down() {
        wait_readable(&listener);
        match listener.accept() {
            Ok((tcp, _)) => spawn_session(&shared, tcp),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => {}
            // Out of descriptors or similar: back off instead of spinning.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    drop(listener);
    // Wake every session blocked in a read; each rolls back and exits.
    for s in shared.sessions.lock().values() {
        if let Some(sock) = &s.socket {
            let _ = sock.shutdown(std::net::Shutdown::Both);
        }
    }
    let mut n = shared.threads.lock();
    while *n > 0 {
        shared.threads_done.wait(&mut n);
    }
    drop(n);
    if let Some(loops) = shared.loops.get() {
        loops.stop();
    }
    if let Some(replication) = &shared.replication {
        replication.shut_down();
    }
    if let Some(cache) = shared.cache.get() {
        cache.shutdown();
    }
    shared.db.clone().close().map_err(|e| ServerError::Engine(e.to_string()))
}

/// A server that is listening. Dropping it without `shutdown`/`wait`
/// leaves it running in the background until the process ends.
pub struct RunningServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<Result<(), ServerError>>>,
}

/// Stops a server from another thread (signal handler loop, tests).
#[derive(Clone)]
pub struct ShutdownHandle(Arc<Shared>);

impl ShutdownHandle {
    pub fn shutdown(&self) {
        self.0.request_shutdown();
    }
}

impl RunningServer {
    pub(crate) fn start(
        listener: TcpListener,
        shared: Arc<Shared>,
        event_loops: usize,
    ) -> Result<RunningServer, ServerError> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        if let Some(loops) = crate::event_loop::Loops::start(event_loops, &shared)? {
            let _ = shared.loops.set(loops);
        }
        let s = shared.clone();
        let acceptor =
            std::thread::Builder::new().name("pgtier-accept".to_owned()).spawn(move || accept_loop(listener, s))?;
        Ok(RunningServer { addr, shared, acceptor: Some(acceptor) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the Prometheus endpoint listens, when `[metrics] listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.shared.metrics_addr
    }

    /// The engine the sessions run on (for tests and admin tools).
    pub fn database(&self) -> &Database {
        &self.shared.db
    }

    /// The cache groups' manager all sessions share (for in-process
    /// tools: the demo reads write-through's figures from it).
    pub fn cache(&self) -> Option<&Arc<pgtier_cache::Cache>> {
        self.shared.cache.get()
    }

    /// Sessions ended by a panic since start (each a bug; the server goes on).
    pub fn session_panics(&self) -> u64 {
        self.shared.session_panics.load(Ordering::Relaxed)
    }

    /// Reads the configuration file again (what SIGHUP and
    /// `pg_reload_conf()` do): see [`Shared::reload`].
    pub fn reload(&self) -> Result<Reloaded, ServerError> {
        self.shared.reload()
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.shared.clone())
    }

    /// Sessions currently connected (authenticated or authenticating).
    pub fn active_connections(&self) -> usize {
        self.shared.active.load(Ordering::Acquire)
    }

    /// Stops accepting, disconnects every session (open transactions roll
    /// back), waits for them, then checkpoints and flushes the engine.
    pub fn shutdown(self) {
        let _ = self.shutdown_checked();
    }

    /// `shutdown`, reporting a failure to checkpoint/flush.
    pub fn shutdown_checked(mut self) -> Result<(), ServerError> {
        self.shared.request_shutdown();
        self.join()
    }

    /// Blocks until the server is shut down through a [`ShutdownHandle`].
    pub fn wait(mut self) {
        let _ = self.join();
    }

    fn join(&mut self) -> Result<(), ServerError> {
        match self.acceptor.take() {
            Some(h) => h.join().unwrap_or_else(|_| Err(ServerError::Engine("server thread panicked".to_owned()))),
            None => Ok(()),
        }
    }
}
