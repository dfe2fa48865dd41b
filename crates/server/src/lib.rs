//! pgtier's PostgreSQL wire-protocol server: any PostgreSQL driver talks to
//! the engine through `pgtier_sql` sessions. See README.md for what it
//! owns, its invariants (session state, durability per commit mode) and its
//! limits.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod auth;
pub mod config;
mod copy;
mod event_loop;
mod hba;
pub mod logging;
mod login;
mod metrics;
mod numeric_wire;
mod passthrough;
mod replication;
mod server;
mod session;
mod tls;
mod types;
mod wire;

use std::net::TcpListener;
use std::sync::Arc;

use pgtier_engine::{CommitMode, Database, EngineConfig};

pub use config::{
    AuthConfig, AuthMethod, CacheSection, CommitModeName, LogSection, NameList, PassthroughConfig, PassthroughMode,
    RuleConfig, ServerConfig, TlsConfig, UserConfig,
};
pub use pgtier_backend::{BackendConfig, SslMode};
pub use server::{Reloaded, RunningServer, ShutdownHandle};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("cannot listen on {addr}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("engine: {0}")]
    Engine(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Validates `config`, opens the engine, binds the listener and starts
/// accepting. Returns once the server is listening; it runs on its own
/// threads until [`RunningServer::shutdown`].
pub fn start(config: ServerConfig) -> Result<RunningServer, ServerError> {
    let addr = config.validate()?;
    for line in config.deprecations() {
        tracing::warn!("{line}");
    }
    // Before listening: a password file or CA certificate that cannot be
    // read is a startup error, not a first-query one.
    let backend = config.backend()?;
    let backend_tls = match &backend {
        Some(params) => tls::backend_client(params)?,
        None => None,
    };
    let auth = auth::AuthState::new(&config, addr, None)?;
    let tls = config.tls.as_ref().map(tls::load).transpose()?;
    // Bind before opening the engine: a port in use fails fast, without
    // replaying the WAL first.
    let listener = TcpListener::bind(addr).map_err(|source| ServerError::Listen { addr, source })?;
    let metrics_listener = match config.metrics_addr()? {
        Some(addr) => Some(TcpListener::bind(addr).map_err(|source| ServerError::Listen { addr, source })?),
        None => None,
    };
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| ServerError::Engine(format!("data directory {}: {e}", config.data_dir.display())))?;
    let engine = EngineConfig {
        commit_mode: match config.commit_mode {
            CommitModeName::Sync => CommitMode::Sync,
            CommitModeName::Async => CommitMode::Async,
        },
        // Sessions share the CPU with their clients: a committer that yields
        // waits for them too (TATP sync, 16 clients: UL p99 13-15 ms with
        // the embedded default of 20 yields, 7-10 ms with none).
        wal: pgtier_engine::WalConfig { commit_yields: 0, ..pgtier_engine::WalConfig::default() },
        ..EngineConfig::default()
    };
    // Before the engine opens: a session opening on flagged tables starts
    // their copies, and the executor's resources are fixed at that start.
    pgtier_sql::session::set_analytics_config(config.analytics.to_olap_config()?);
    let db = Database::open(&config.data_dir, engine)
        .map_err(|e| ServerError::Engine(format!("data directory {}: {e}", config.data_dir.display())))?;
    // A standby refuses its own writes from here on (before anything below
    // could write): its log is the active's.
    let replication = match config.replication.settings()? {
        Some(settings) => {
            let failover = match &settings.lease {
                Some(lease) => {
                    let Some(params) = backend.clone() else {
                        return Err(ServerError::Config(
                            "[replication] lease_ms needs [backend]: the pair's lease lives in PostgreSQL".into(),
                        ));
                    };
                    let member = lease.member.clone().unwrap_or_else(|| addr.to_string());
                    let config = pgtier_cache::lease::LeaseConfig {
                        node: config.cache.awt_node.clone(),
                        member,
                        duration: lease.duration,
                    };
                    Some(replication::Failover::new(config, params))
                }
                None => None,
            };
            Some(replication::Replication::new(db.clone(), settings, failover)?)
        }
        None => None,
    };
    let standby = replication.as_ref().is_some_and(|r| r.is_standby());
    // The configuration file's users are the bootstrap superusers (roles
    // made with CREATE ROLE live in the engine's catalog beside them). A
    // standby has the active's (its catalog is the active's).
    if !standby {
        register_users(&db, &config)?;
    }
    let mut shared = server::Shared::new(db.clone(), auth, config.clone(), addr, tls);
    // Checked as SET checks them, once, so a session never meets a bad one.
    let mut probe = pgtier_sql::Connection::new(db.clone());
    for (name, value) in config.setting_defaults() {
        probe
            .set_setting_default(&name, &value)
            .map_err(|e| ServerError::Config(format!("[settings] {name}: {}", e.message)))?;
    }
    drop(probe);
    let mut defaults = config.setting_defaults();
    if standby {
        // As on a PostgreSQL hot standby: drivers' target_session_attrs
        // read these.
        defaults.push(("default_transaction_read_only".into(), "on".into()));
        defaults.push(("transaction_read_only".into(), "on".into()));
    }
    shared.setting_defaults = parking_lot::RwLock::new(Arc::new(defaults));
    shared.log = parking_lot::RwLock::new(config.log.settings()?);
    // One cache for all sessions. Without [backend] it still opens: groups
    // already defined keep answering; what needs PostgreSQL fails with 08001.
    let mut cache_config = config.cache.to_cache_config()?;
    cache_config.takeover = config.takeover;
    if let Some((tier, mode)) = config.tier.to_tier_config(&config.data_dir)? {
        cache_config.tier = Some(tier);
        cache_config.tier_mode = mode;
        cache_config.local_tables_budget = config.tier.local_tables_budget()?;
    }
    let open_cache = {
        let (db, backend) = (db.clone(), backend.clone());
        move |lease_epoch: i64| -> Result<Arc<pgtier_cache::Cache>, String> {
            cache_config.lease_epoch = lease_epoch;
            let cache = pgtier_cache::Cache::open(db.clone(), backend, cache_config)
                .map_err(|e| format!("cache groups: {e}"))?;
            // READONLY groups' WHERE, evaluated on rows autorefresh receives.
            cache.set_predicate_compiler(Arc::new(pgtier_sql::cache_predicate::SqlPredicates::new(db)));
            Ok(cache)
        }
    };
    match &replication {
        // A standby runs no write-through, autorefresh or aging: the cache
        // opens when it is promoted, as at a restart.
        Some(r) if standby => r.set_cache_opener(Box::new(open_cache)),
        Some(r) => {
            // The active takes the pair's lease first: its write-through
            // sessions carry the epoch PostgreSQL checks.
            let epoch = r.take_lease_at_start().map_err(ServerError::Config)?;
            let cache = open_cache(epoch).map_err(ServerError::Engine)?;
            let _ = shared.cache.set(cache);
        }
        None => {
            let cache = open_cache(0).map_err(ServerError::Engine)?;
            let _ = shared.cache.set(cache);
        }
    }
    shared.replication = replication.clone();
    shared.passthrough = match backend {
        Some(params) if config.passthrough.mode != PassthroughMode::Off => Some(Arc::new(passthrough::Pool::new(
            config.passthrough.mode,
            config.passthrough.non_superusers,
            params,
            backend_tls,
        ))),
        _ => None,
    };
    shared.metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
    let shared = Arc::new(shared);
    if let Some(metrics) = metrics_listener {
        metrics::start(metrics, shared.clone())?;
    }
    if let Some(r) = &replication {
        r.set_shared(Arc::downgrade(&shared));
        r.start()?;
    }
    RunningServer::start(listener, shared, config.event_loops())
}

/// Registers `[[auth.users]]` as bootstrap superuser roles, in file order
/// (the first is OID 10, the owner of what records no other).
pub(crate) fn register_users(db: &Database, config: &ServerConfig) -> Result<(), ServerError> {
    let names: Vec<String> = config.auth.users.iter().map(|u| u.name.clone()).collect();
    pgtier_sql::catalog::roles::register_bootstrap_users(db, &names)
        .map_err(|e| ServerError::Engine(format!("registering [[auth.users]] as roles: {}", e.message)))
}
