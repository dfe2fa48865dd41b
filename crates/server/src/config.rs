//! `pgtier.toml`: what the server listens on, where its data lives, who may
//! connect and how. Validated completely at startup so a bad setting is one
//! clear error before anything listens.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use pgtier_backend::{BackendConfig, ConnectParams};
use serde::Deserialize;

use crate::ServerError;

mod analytics;
mod tier;

pub use analytics::AnalyticsSection;
pub use tier::TierSection;

/// PostgreSQL's own default connection limit.
const MAX_CONNECTIONS_DEFAULT: usize = 100;
/// Largest Query/Parse/Bind/CopyData message accepted; beyond it the
/// connection gets 08P01 and is closed (PostgreSQL allows up to 1 GiB).
const MAX_MESSAGE_BYTES_DEFAULT: usize = 64 << 20;
/// More loops than CPUs only adds switching (one per CPU is the default).
const EVENT_LOOPS_MAX: usize = 256;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `host:port`; port 0 picks a free port (tests).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The engine's directory (WAL and checkpoints); created if missing.
    pub data_dir: PathBuf,
    /// When a COMMIT is acknowledged: after the WAL fsync (`sync`) or once
    /// in the WAL buffer (`async`, flushed within milliseconds).
    #[serde(default)]
    pub commit_mode: CommitModeName,
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    #[serde(default)]
    pub auth: AuthConfig,
    pub tls: Option<TlsConfig>,
    /// The PostgreSQL pgtier is in front of (DESIGN.md §3): passthrough
    /// and, later, loading, write-through and autorefresh connect to it.
    pub backend: Option<BackendConfig>,
    #[serde(default)]
    pub passthrough: PassthroughConfig,
    /// Threads that serve plain-TCP sessions (event_loop.rs); 0 (the
    /// default): a thread per session.
    pub event_loops: Option<usize>,
    /// Cache groups (DESIGN.md §3): memory budget, aging, load parallelism.
    #[serde(default)]
    pub cache: CacheSection,
    /// The flash tier under memory (`[tier]`); off unless `size` is given.
    #[serde(default)]
    pub tier: TierSection,
    /// `[analytics]`: the analytic executor's CPU share, nice, placement
    /// and memory limit (config/analytics.rs), set before databases open.
    #[serde(default)]
    pub analytics: AnalyticsSection,
    #[serde(default)]
    pub metrics: MetricsSection,
    /// `[replication]`: a hot standby fed by this server's WAL, or this
    /// server as one (replication.rs); off unless `role` is set.
    #[serde(default)]
    pub replication: ReplicationSection,
    /// `[log]`: level, format, and which events (logging.rs).
    #[serde(default)]
    pub log: LogSection,
    /// `[settings]`: session settings' defaults, as postgresql.conf gives
    /// them (`statement_timeout = "5s"`, `idle_in_transaction_session_timeout
    /// = 60000`): every session starts with them and `SET x TO DEFAULT`
    /// returns to them. Checked at startup as `SET` checks a value.
    #[serde(default)]
    pub settings: std::collections::BTreeMap<String, SettingValue>,
    /// Take the cache's node name over from another data directory at
    /// start (`pgtier serve --takeover`): a one-shot decision of the command
    /// line, never read from the file.
    #[serde(skip)]
    pub takeover: bool,
    /// The file this was read from (`from_toml_file`): what a reload
    /// (SIGHUP, `pg_reload_conf()`) reads again.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// A `[settings]` value: TOML text, integer or boolean, as SET takes it.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum SettingValue {
    Text(String),
    Integer(i64),
    Bool(bool),
}

impl SettingValue {
    pub fn as_setting(&self) -> String {
        match self {
            SettingValue::Text(s) => s.clone(),
            SettingValue::Integer(n) => n.to_string(),
            SettingValue::Bool(b) => if *b { "on" } else { "off" }.to_owned(),
        }
    }
}

/// `[replication]`: see the README's "High availability".
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicationSection {
    /// `"active"` (serves a standby on `listen`) or `"standby"` (follows
    /// `primary`, read-only until `SELECT pg_promote()`).
    pub role: Option<String>,
    /// `"async"` (default: a commit returns once durable here) or `"sync"`
    /// (once the standby has it durably too).
    pub mode: Option<String>,
    /// The active's replication address (`host:port`); a standby's, where
    /// it serves a standby of its own once promoted (optional).
    pub listen: Option<String>,
    /// The standby's: the active's replication address.
    pub primary: Option<String>,
    /// How long a sync commit waits for the standby (default 10000).
    pub sync_timeout_ms: Option<u64>,
    /// Automatic failover: the pair's lease in PostgreSQL (crates/cache
    /// lease.rs) lasts this long past each renewal; the active stops
    /// writing when it cannot renew it, the standby promotes once it can
    /// take it. Unset: no automatic failover (`pg_promote()` by hand).
    pub lease_ms: Option<u64>,
    /// This member's name in the lease (default: the pgwire listen address).
    pub member: Option<String>,
    /// How long the active waits for a standby that is gone before it
    /// goes on without it: write-through to PostgreSQL resumes (and, in
    /// sync mode, commits stop waiting for it); with a lease, the standby
    /// is barred from taking over until it caught up again. 0: never
    /// (default in sync mode; 30000 in async mode).
    pub standby_timeout_ms: Option<u64>,
}

/// `[replication] lease_ms`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSettings {
    pub duration: std::time::Duration,
    pub member: Option<String>,
}

/// `[replication]` checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicationRole {
    Active {
        listen: SocketAddr,
    },
    /// `listen`: where it serves a standby of its own once promoted.
    Standby {
        primary: String,
        listen: Option<SocketAddr>,
    },
}

#[derive(Clone, Debug)]
pub struct ReplicationSettings {
    pub role: ReplicationRole,
    pub sync: bool,
    pub sync_timeout: std::time::Duration,
    /// Automatic failover by the pair's lease (None: by hand).
    pub lease: Option<LeaseSettings>,
    /// `standby_timeout_ms` (None: never go on without the standby).
    pub standby_timeout: Option<std::time::Duration>,
}

impl ReplicationSection {
    /// None when replication is off; an error names the key.
    pub fn settings(&self) -> Result<Option<ReplicationSettings>, ServerError> {
        let bad = |m: &str| Err(ServerError::Config(format!("[replication] {m}")));
        let sync = match self.mode.as_deref() {
            None | Some("async") => false,
            Some("sync") => true,
            Some(other) => return bad(&format!("mode {other:?} must be \"sync\" or \"async\"")),
        };
        let role = match self.role.as_deref() {
            None => {
                if self.mode.is_some()
                    || self.listen.is_some()
                    || self.primary.is_some()
                    || self.lease_ms.is_some()
                    || self.standby_timeout_ms.is_some()
                {
                    return bad("role must be set (\"active\" or \"standby\") when other keys are");
                }
                return Ok(None);
            }
            Some("active") => {
                let Some(text) = &self.listen else { return bad("role \"active\" needs listen = \"host:port\"") };
                if self.primary.is_some() {
                    return bad("primary is for a standby; an active has listen");
                }
                let Some(listen) = text.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
                    return bad(&format!("listen {text:?} is not an address like 127.0.0.1:5499"));
                };
                ReplicationRole::Active { listen }
            }
            Some("standby") => {
                let Some(primary) = &self.primary else { return bad("role \"standby\" needs primary = \"host:port\"") };
                let listen = match &self.listen {
                    None => None,
                    Some(text) => match text.to_socket_addrs().ok().and_then(|mut a| a.next()) {
                        Some(addr) => Some(addr),
                        None => return bad(&format!("listen {text:?} is not an address like 127.0.0.1:5499")),
                    },
                };
                ReplicationRole::Standby { primary: primary.clone(), listen }
            }
            Some(other) => return bad(&format!("role {other:?} must be \"active\" or \"standby\"")),
        };
        let ms = self.sync_timeout_ms.unwrap_or(10_000);
        if ms == 0 {
            return bad("sync_timeout_ms must be at least 1");
        }
        let lease = match self.lease_ms {
            None if self.member.is_some() => return bad("member names this server in the lease: set lease_ms too"),
            None => None,
            Some(ms) if u128::from(ms) < pgtier_cache::lease::LEASE_MIN.as_millis() => {
                return bad(&format!(
                    "lease_ms {ms} is below the {} ms minimum",
                    pgtier_cache::lease::LEASE_MIN.as_millis()
                ));
            }
            Some(ms) => Some(LeaseSettings {
                duration: std::time::Duration::from_millis(ms),
                member: self.member.clone().filter(|m| !m.is_empty()),
            }),
        };
        let standby_timeout = match self.standby_timeout_ms.unwrap_or(if sync { 0 } else { 30_000 }) {
            0 => None,
            ms => Some(std::time::Duration::from_millis(ms)),
        };
        Ok(Some(ReplicationSettings {
            role,
            sync,
            sync_timeout: std::time::Duration::from_millis(ms),
            lease,
            standby_timeout,
        }))
    }
}

/// `[metrics]`: the Prometheus endpoint (`GET /metrics`); off unless `listen` is set.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    pub listen: Option<String>,
}

/// `[cache]`: mapped to `pgtier_cache::CacheConfig` by [`CacheSection::to_cache_config`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheSection {
    /// Memory all cache groups may use, in PostgreSQL's units ("512MB", "2GB").
    pub memory_budget: String,
    /// Aging starts evicting above this fraction of the budget ...
    pub high_watermark: f64,
    /// ... and stops below this one.
    pub low_watermark: f64,
    pub aging_interval_ms: u64,
    /// PARALLEL for LOAD/REFRESH that do not say.
    pub load_parallel: usize,
    /// This pgtier's node name in PostgreSQL (one per pgtier sharing a
    /// PostgreSQL; owned by one data directory: pgtier-cache's `node.rs`).
    pub awt_node: String,
    /// AWT apply lanes, each with its own PostgreSQL connection.
    pub awt_apply_connections: usize,
    /// WAL kept for write-through before writes to AWT groups fail (53400), in PostgreSQL's units.
    pub awt_retained_wal_max: String,
    /// How long an AWT batch waits for more transactions after its first.
    pub awt_batch_delay_ms: u64,
    /// An AWT lane with work and no progress this long is reported and reconnected.
    pub awt_stall_timeout_s: u64,
    /// WAL a READONLY group's replication slot may keep PostgreSQL from
    /// removing before the group loads again from a new slot, in PostgreSQL's units.
    pub autorefresh_retained_wal_max: String,
    /// Values of a PostgreSQL sequence reserved at a time for the cached
    /// columns it generates: this node's CACHE n (a block not used up is
    /// lost when pgtier stops).
    pub sequence_block: u32,
}

impl Default for CacheSection {
    fn default() -> CacheSection {
        let awt = pgtier_cache::AwtConfig::default();
        CacheSection {
            memory_budget: "512MB".into(),
            high_watermark: 0.9,
            low_watermark: 0.8,
            aging_interval_ms: 1000,
            load_parallel: 1,
            awt_node: awt.node,
            awt_apply_connections: awt.apply_connections,
            awt_retained_wal_max: format!("{}GB", awt.retained_wal_max >> 30),
            awt_batch_delay_ms: u64::try_from(awt.batch_delay.as_millis()).unwrap_or(0),
            awt_stall_timeout_s: awt.stall_timeout.as_secs(),
            autorefresh_retained_wal_max: format!(
                "{}GB",
                pgtier_cache::AutorefreshConfig::default().retained_wal_max >> 30
            ),
            sequence_block: pgtier_cache::DEFAULT_SEQUENCE_BLOCK,
        }
    }
}

impl CacheSection {
    /// `self` with the keys a running cache can change (`pgtier_cache::Tuning`)
    /// taken from `new`; the others need a restart (`restart_keys`).
    pub(crate) fn live_keys_of(&self, new: &CacheSection) -> CacheSection {
        CacheSection {
            awt_node: self.awt_node.clone(),
            awt_apply_connections: self.awt_apply_connections,
            sequence_block: self.sequence_block,
            ..new.clone()
        }
    }

    /// The cache's settings; a bad value is an error naming its key.
    pub fn to_cache_config(&self) -> Result<pgtier_cache::CacheConfig, ServerError> {
        let bad = |m: String| Err(ServerError::Config(format!("[cache] {m}")));
        let budget = match pgtier_cache::CreateGroup::parse_memory_size(&self.memory_budget) {
            Ok(0) => return bad("memory_budget must be more than 0".into()),
            Ok(bytes) => bytes,
            Err(e) => return bad(format!("memory_budget: {e}")),
        };
        for (key, value) in [("high_watermark", self.high_watermark), ("low_watermark", self.low_watermark)] {
            if !(value > 0.0 && value <= 1.0) {
                return bad(format!("{key} must be in (0, 1], not {value}"));
            }
        }
        if self.low_watermark >= self.high_watermark {
            return bad(format!(
                "low_watermark ({}) must be below high_watermark ({})",
                self.low_watermark, self.high_watermark
            ));
        }
        if self.aging_interval_ms == 0 {
            return bad("aging_interval_ms must be at least 1".into());
        }
        if self.load_parallel == 0 {
            return bad("load_parallel must be at least 1".into());
        }
        if let Err(error) = pgtier_cache::validate_node_name(&self.awt_node) {
            return bad(format!(
                "awt_node: {error} (lowercase letters and digits, starting with a letter, at most {} characters)",
                pgtier_cache::NODE_NAME_MAX
            ));
        }
        if !(1..=3600).contains(&self.awt_stall_timeout_s) {
            return bad(format!("awt_stall_timeout_s must be 1 to 3600, not {}", self.awt_stall_timeout_s));
        }
        if !(1..=64).contains(&self.awt_apply_connections) {
            return bad(format!("awt_apply_connections must be 1 to 64, not {}", self.awt_apply_connections));
        }
        let retained = match pgtier_cache::CreateGroup::parse_memory_size(&self.awt_retained_wal_max) {
            Ok(bytes) if bytes >= 1 << 20 => bytes,
            Ok(_) => return bad("awt_retained_wal_max must be at least 1MB".into()),
            Err(e) => return bad(format!("awt_retained_wal_max: {e}")),
        };
        let autorefresh_retained =
            match pgtier_cache::CreateGroup::parse_memory_size(&self.autorefresh_retained_wal_max) {
                Ok(bytes) if bytes >= 1 << 20 => bytes,
                Ok(_) => return bad("autorefresh_retained_wal_max must be at least 1MB".into()),
                Err(e) => return bad(format!("autorefresh_retained_wal_max: {e}")),
            };
        if !(1..=1_000_000).contains(&self.sequence_block) {
            return bad(format!("sequence_block must be 1 to 1000000, not {}", self.sequence_block));
        }
        if self.awt_batch_delay_ms > 1000 {
            return bad(format!("awt_batch_delay_ms must be at most 1000, not {}", self.awt_batch_delay_ms));
        }
        Ok(pgtier_cache::CacheConfig {
            memory_budget: Some(budget),
            high_watermark: self.high_watermark,
            low_watermark: self.low_watermark,
            aging_interval: std::time::Duration::from_millis(self.aging_interval_ms),
            load_parallel: self.load_parallel,
            awt: pgtier_cache::AwtConfig {
                node: self.awt_node.clone(),
                apply_connections: self.awt_apply_connections,
                retained_wal_max: retained,
                batch_delay: std::time::Duration::from_millis(self.awt_batch_delay_ms),
                stall_timeout: std::time::Duration::from_secs(self.awt_stall_timeout_s),
                ..pgtier_cache::AwtConfig::default()
            },
            autorefresh: pgtier_cache::AutorefreshConfig { retained_wal_max: autorefresh_retained },
            // A one-shot decision of the command line (`pgtier serve --takeover`), never a standing setting.
            takeover: false,
            // Set by the pair's lease when the process holds it (`[replication]`), 0 outside a pair.
            lease_epoch: 0,
            sequence_block: self.sequence_block,
            // `[tier]`, a section of its own (`TierSection::to_tier_config`).
            tier: None,
            tier_mode: pgtier_cache::TierMode::Clean,
            local_tables_budget: None,
        })
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CommitModeName {
    #[default]
    Sync,
    Async,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// How every connection authenticates when there are no `rules` (the
    /// one implied rule: all addresses, users and databases).
    #[serde(default)]
    pub method: AuthMethod,
    #[serde(default)]
    pub users: Vec<UserConfig>,
    /// Host rules, as pg_hba.conf (hba.rs): the first that matches decides.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// A failed login (wrong password, unknown user, refused by the rules)
    /// is answered this long after it failed (auth_delay's
    /// `auth_delay.milliseconds`). Default [`FAILURE_DELAY_MS_DEFAULT`].
    pub failure_delay_ms: Option<u64>,
}

/// One second: a password guesser gets one answer a second per
/// connection, a person who mistyped hardly notices.
pub const FAILURE_DELAY_MS_DEFAULT: u64 = 1000;
/// More than a minute would outlast the client's own connect timeout.
const FAILURE_DELAY_MS_MAX: u64 = 60_000;

impl AuthConfig {
    pub fn failure_delay(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.failure_delay_ms.unwrap_or(FAILURE_DELAY_MS_DEFAULT))
    }
}

/// One `[[auth.rules]]` entry as written; checked by hba.rs, which names
/// the rule's index in every error.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// "all", an address ("10.1.2.3", "::1") or a CIDR network ("10.0.0.0/8").
    pub address: String,
    /// "all", a user name or a list of them.
    #[serde(default)]
    pub user: NameList,
    /// "all", a database name or a list of them.
    #[serde(default)]
    pub database: NameList,
    /// "scram-sha-256", "trust" or "reject".
    pub method: String,
    /// "optional" (default: any connection), "required" (only TLS ones,
    /// pg_hba.conf's hostssl) or "off" (only plain ones, hostnossl).
    pub tls: Option<String>,
    /// `trust` for an address that is not loopback must say so.
    #[serde(default)]
    pub allow_trust_from_network: bool,
    /// The client must present a certificate that chains to `[tls]
    /// client_ca` (needs `tls = "required"`).
    #[serde(default)]
    pub client_cert: bool,
}

/// "all", one name, or a list.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum NameList {
    One(String),
    Many(Vec<String>),
}

impl Default for NameList {
    fn default() -> NameList {
        NameList::One("all".to_owned())
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum AuthMethod {
    #[default]
    #[serde(rename = "scram-sha-256")]
    ScramSha256,
    /// No password; refused unless the server listens on loopback only.
    #[serde(rename = "trust")]
    Trust,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    /// Plaintext, or a `SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>`
    /// verifier as PostgreSQL stores it (`pg_authid.rolpassword`).
    pub password: String,
    /// Sessions this user may have at once (PostgreSQL's `CONNECTION
    /// LIMIT`); beyond it 53300. None: no limit but `max_connections`.
    pub connection_limit: Option<usize>,
}

impl std::fmt::Debug for UserConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a password, not even in a debug dump of the config.
        f.debug_struct("UserConfig")
            .field("name", &self.name)
            .field("connection_limit", &self.connection_limit)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The oldest TLS version accepted: "1.2" (default) or "1.3".
    pub min_version: Option<String>,
    /// PEM certificates of the CAs client certificates must chain to;
    /// without it no client certificate is asked for.
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: "optional" (default: checked when the client
    /// presents one; a rule's `client_cert = true` then requires it) or
    /// "required" (every TLS handshake needs one).
    pub client_cert: Option<String>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PassthroughConfig {
    #[serde(default)]
    pub mode: PassthroughMode,
    /// Roles that are not superusers may pass statements through too
    /// (PostgreSQL runs them as the backend's user); off by default.
    #[serde(default)]
    pub non_superusers: bool,
    /// Deprecated alias of `[backend] url`.
    pub backend_url: Option<String>,
    /// Deprecated alias of `[backend] pool_size`.
    pub pool_size: Option<usize>,
}

impl std::fmt::Debug for PassthroughConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        let url = self.backend_url.as_deref().map(pgtier_backend::redact_url);
        f.debug_struct("PassthroughConfig")
            .field("mode", &self.mode)
            .field("non_superusers", &self.non_superusers)
            .field("backend_url", &url)
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PassthroughMode {
    #[default]
    Off,
    Reads,
    All,
}

fn default_listen() -> String {
    "127.0.0.1:5433".to_owned()
}

fn default_max_connections() -> usize {
    MAX_CONNECTIONS_DEFAULT
}

fn default_max_message_bytes() -> usize {
    MAX_MESSAGE_BYTES_DEFAULT
}

impl ServerConfig {
    /// A config for `data_dir` with every other setting at its default
    /// (loopback, SCRAM with no users yet).
    pub fn new(data_dir: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            listen: default_listen(),
            data_dir: data_dir.into(),
            commit_mode: CommitModeName::default(),
            max_connections: MAX_CONNECTIONS_DEFAULT,
            max_message_bytes: MAX_MESSAGE_BYTES_DEFAULT,
            auth: AuthConfig::default(),
            tls: None,
            backend: None,
            passthrough: PassthroughConfig::default(),
            event_loops: None,
            cache: CacheSection::default(),
            tier: TierSection::default(),
            analytics: AnalyticsSection::default(),
            metrics: MetricsSection::default(),
            replication: ReplicationSection::default(),
            log: LogSection::default(),
            settings: std::collections::BTreeMap::new(),
            takeover: false,
            source: None,
        }
    }

    /// `[settings]` as (name, value) pairs for `Connection::set_setting_default`.
    pub fn setting_defaults(&self) -> Vec<(String, String)> {
        self.settings.iter().map(|(k, v)| (k.to_lowercase(), v.as_setting())).collect()
    }

    /// `event_loops`, or its default, 0: a thread per session. Loops gain
    /// up to 10-18 % throughput at saturation with async commits but lose
    /// the latency tail (a preempted loop thread holds up all its
    /// sessions: TATP p99 0.75x PostgreSQL's at saturation and 2.1x lower
    /// at 10k txn/s, against 2.0-2.3x and 3.1-4.0x lower with a thread per
    /// session; server README, "Threads"), and with sync commits every
    /// commit hands its loop to another thread (16.8k against 37.1k TPS).
    pub fn event_loops(&self) -> usize {
        self.event_loops.unwrap_or(0)
    }

    pub fn from_toml_str(text: &str) -> Result<ServerConfig, ServerError> {
        toml::from_str(text).map_err(|e| {
            // One line: "line N: what", not toml's multi-line excerpt.
            let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let what = e.message().trim().replace('\n', " ");
            ServerError::Config(match line {
                Some(n) => format!("line {n}: {what}"),
                None => what,
            })
        })
    }

    /// Reads `path`; relative paths inside (data_dir, TLS files) are taken
    /// relative to the file's directory, so a config works from any cwd.
    pub fn from_toml_file(path: &Path) -> Result<ServerConfig, ServerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ServerError::Config(format!("cannot read {}: {e}", path.display())))?;
        let mut config = ServerConfig::from_toml_str(&text)
            .map_err(|e| ServerError::Config(format!("{}: {}", path.display(), e.detail())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let rebase = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        rebase(&mut config.data_dir);
        if let Some(tls) = &mut config.tls {
            rebase(&mut tls.cert);
            rebase(&mut tls.key);
            tls.client_ca.iter_mut().for_each(rebase);
        }
        config.source = Some(path.to_path_buf());
        if let Some(backend) = &mut config.backend {
            backend.password_file.iter_mut().chain(backend.sslrootcert.iter_mut()).for_each(rebase);
        }
        Ok(config)
    }

    /// The listen address, resolved (the first address `listen` names).
    pub fn listen_addr(&self) -> Result<SocketAddr, ServerError> {
        self.listen
            .to_socket_addrs()
            .map_err(|e| ServerError::Config(format!("listen = {:?}: {e}", self.listen)))?
            .next()
            .ok_or_else(|| ServerError::Config(format!("listen = {:?} names no address", self.listen)))
    }

    /// Every rule that does not need the network or the disk.
    /// `[metrics] listen` as an address, when set.
    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>, ServerError> {
        let Some(text) = &self.metrics.listen else { return Ok(None) };
        text.parse().map(Some).map_err(|_| {
            ServerError::Config(format!("[metrics] listen {text:?} is not an address like 127.0.0.1:9187"))
        })
    }

    pub(crate) fn validate(&self) -> Result<SocketAddr, ServerError> {
        let addr = self.listen_addr()?;
        let bad = |m: String| Err(ServerError::Config(m));
        if self.max_connections == 0 {
            return bad("max_connections must be at least 1".to_owned());
        }
        if self.max_message_bytes < 1024 {
            return bad("max_message_bytes must be at least 1024".to_owned());
        }
        if self.event_loops.is_some_and(|n| n > EVENT_LOOPS_MAX) {
            return bad(format!("event_loops must be at most {EVENT_LOOPS_MAX} (0: a thread per session)"));
        }
        self.analytics.to_olap_config()?;
        self.validate_auth(addr)?;
        self.validate_tls()?;
        self.cache.to_cache_config()?;
        self.log.settings()?;
        if self.replication.settings()?.is_some() && self.tier.mode.as_deref() == Some("write-back") {
            return bad("[replication] with [tier] mode = \"write-back\": the flash tier's dirty rows are not in the WAL a standby receives; use mode = \"clean\"".to_owned());
        }
        let backend = self.backend_config()?;
        let mode = self.passthrough.mode;
        if mode != PassthroughMode::Off && backend.is_none() {
            let name = if mode == PassthroughMode::All { "all" } else { "reads" };
            return bad(format!("[passthrough] mode is \"{name}\" but no backend is configured; set [backend] url"));
        }
        Ok(addr)
    }

    /// `[auth]`: what can change on a reload (the listen address is the
    /// running server's). Returns the rules in force.
    pub(crate) fn validate_auth(&self, addr: SocketAddr) -> Result<crate::hba::Rules, ServerError> {
        let bad = |m: String| Err(ServerError::Config(m));
        if self.auth.rules.is_empty() {
            match self.auth.method {
                AuthMethod::Trust if !addr.ip().is_loopback() => {
                    return bad(format!(
                        "auth method \"trust\" is only allowed when listening on a loopback address, not {addr}; use \"scram-sha-256\" (or [[auth.rules]] with allow_trust_from_network = true)"
                    ));
                }
                _ => {}
            }
        }
        let has_client_ca = self.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
        let rules = crate::hba::Rules::from_config(&self.auth, addr, has_client_ca)?;
        if rules.any_scram() && self.auth.users.is_empty() {
            return bad("auth method \"scram-sha-256\" needs at least one [[auth.users]] entry".to_owned());
        }
        for (i, u) in self.auth.users.iter().enumerate() {
            if u.name.is_empty() {
                return bad(format!("auth.users[{i}] has an empty name"));
            }
            if self.auth.users[..i].iter().any(|o| o.name == u.name) {
                return bad(format!("auth.users: user \"{}\" is listed twice", u.name));
            }
        }
        if let Some(ms) = self.auth.failure_delay_ms
            && ms > FAILURE_DELAY_MS_MAX
        {
            return bad(format!("[auth] failure_delay_ms must be at most {FAILURE_DELAY_MS_MAX}, not {ms}"));
        }
        Ok(rules)
    }

    fn validate_tls(&self) -> Result<(), ServerError> {
        let Some(tls) = &self.tls else { return Ok(()) };
        let bad = |m: String| Err(ServerError::Config(format!("[tls] {m}")));
        if let Some(v) = tls.min_version.as_deref()
            && v != "1.2"
            && v != "1.3"
        {
            return bad(format!("min_version must be \"1.2\" or \"1.3\", not {v:?}"));
        }
        match tls.client_cert.as_deref() {
            None => {}
            Some("optional" | "required") if tls.client_ca.is_some() => {}
            Some("optional" | "required") => return bad("client_cert needs client_ca".to_owned()),
            Some(other) => return bad(format!("client_cert must be \"optional\" or \"required\", not {other:?}")),
        }
        Ok(())
    }

    /// The keys of `new` that differ from `self` and cannot change while
    /// the server runs (all but `[auth]`, `[settings]`, `[log]` but its
    /// format, and `[cache]`'s tuning: `CacheSection::live_keys_of`), by name.
    pub(crate) fn restart_keys(&self, new: &ServerConfig) -> Vec<&'static str> {
        let differs = |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| format!("{a:?}") != format!("{b:?}");
        let (old_cache, new_cache) = (&self.cache, &new.cache);
        let pairs: [(&'static str, bool); 16] = [
            ("listen", self.listen != new.listen),
            ("data_dir", self.data_dir != new.data_dir),
            ("commit_mode", self.commit_mode != new.commit_mode),
            ("max_connections", self.max_connections != new.max_connections),
            ("max_message_bytes", self.max_message_bytes != new.max_message_bytes),
            ("event_loops", self.event_loops != new.event_loops),
            ("[tls]", differs(&self.tls, &new.tls)),
            ("[backend]", differs(&self.backend, &new.backend)),
            ("[passthrough]", differs(&self.passthrough, &new.passthrough)),
            ("[cache] awt_node", old_cache.awt_node != new_cache.awt_node),
            ("[cache] awt_apply_connections", old_cache.awt_apply_connections != new_cache.awt_apply_connections),
            ("[cache] sequence_block", old_cache.sequence_block != new_cache.sequence_block),
            ("[tier]", differs(&self.tier, &new.tier)),
            ("[analytics]", differs(&self.analytics, &new.analytics)),
            ("[metrics]", differs(&self.metrics, &new.metrics)),
            ("[log] format", self.log.format != new.log.format),
        ];
        pairs.into_iter().filter(|(_, changed)| *changed).map(|(key, _)| key).collect()
    }

    /// `[backend]` with the deprecated `[passthrough]` keys merged in; None
    /// when no backend URL is given anywhere.
    pub fn backend_config(&self) -> Result<Option<BackendConfig>, ServerError> {
        let old = &self.passthrough;
        let mut merged = self.backend.clone().unwrap_or_default();
        if let Some(url) = &old.backend_url {
            if merged.url.is_some() {
                return Err(ServerError::Config(
                    "both [backend] url and the deprecated [passthrough] backend_url are set; keep [backend] url"
                        .to_owned(),
                ));
            }
            merged.url = Some(url.clone());
        }
        if let Some(n) = old.pool_size {
            if merged.pool_size.is_some() {
                return Err(ServerError::Config(
                    "both [backend] pool_size and the deprecated [passthrough] pool_size are set; keep [backend] pool_size".to_owned(),
                ));
            }
            merged.pool_size = Some(n);
        }
        // A lone deprecated pool_size, with passthrough off, names no backend.
        Ok((self.backend.is_some() || merged.url.is_some()).then_some(merged))
    }

    /// The backend's connection parameters, its password read from the file
    /// or the environment; None when no backend is configured.
    pub fn backend(&self) -> Result<Option<ConnectParams>, ServerError> {
        match self.backend_config()? {
            Some(b) => b.resolve().map(Some).map_err(|e| ServerError::Config(e.to_string())),
            None => Ok(None),
        }
    }

    /// One line per deprecated key in use, naming the key that replaces it.
    pub fn deprecations(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.passthrough.backend_url.is_some() {
            lines.push("[passthrough] backend_url is deprecated; use [backend] url".to_owned());
        }
        if self.passthrough.pool_size.is_some() {
            lines.push("[passthrough] pool_size is deprecated; use [backend] pool_size".to_owned());
        }
        lines
    }
}

/// `[log]`: what the server logs and how, checked by [`LogSection::settings`]
/// (server README, "Logging").
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    /// `error`, `warn`, `info` (default) or `debug`.
    pub level: String,
    /// `text` (default) or `json` (one object per line).
    pub format: String,
    /// Milliseconds: statements running at least this long are logged with
    /// their text; -1 (default) off, 0 every statement (PostgreSQL's setting).
    pub log_min_duration_statement: i64,
    /// Bind parameters in the slow-statement line (default off: they are row values).
    pub log_statement_parameters: bool,
    /// A line per connection received and per authentication (default on;
    /// a failed authentication is logged whatever this says).
    pub log_connections: bool,
    /// A line per session end with its duration and statement count (default on).
    pub log_disconnections: bool,
    /// An error's DETAIL in its line (default off: 23505's quotes the key's values).
    pub log_error_detail: bool,
}

impl Default for LogSection {
    fn default() -> LogSection {
        let d = crate::logging::LogSettings::default();
        LogSection {
            level: "info".into(),
            format: "text".into(),
            log_min_duration_statement: -1,
            log_statement_parameters: d.statement_parameters,
            log_connections: d.connections,
            log_disconnections: d.disconnections,
            log_error_detail: d.error_detail,
        }
    }
}

impl LogSection {
    /// The settings; a bad value is an error naming its key.
    pub fn settings(&self) -> Result<crate::logging::LogSettings, ServerError> {
        use tracing::level_filters::LevelFilter;
        let bad = |m: String| Err(ServerError::Config(format!("[log] {m}")));
        let level = match self.level.as_str() {
            "error" => LevelFilter::ERROR,
            "warn" => LevelFilter::WARN,
            "info" => LevelFilter::INFO,
            "debug" => LevelFilter::DEBUG,
            other => return bad(format!("level must be \"error\", \"warn\", \"info\" or \"debug\", not \"{other}\"")),
        };
        let format = match self.format.as_str() {
            "text" => crate::logging::LogFormat::Text,
            "json" => crate::logging::LogFormat::Json,
            other => return bad(format!("format must be \"text\" or \"json\", not \"{other}\"")),
        };
        let min = self.log_min_duration_statement;
        let min_duration_statement = match u64::try_from(min) {
            _ if min > i64::from(i32::MAX) => {
                return bad(format!("log_min_duration_statement must be -1 to {} (ms), not {min}", i32::MAX));
            }
            Ok(ms) => Some(std::time::Duration::from_millis(ms)),
            Err(_) if min == -1 => None,
            Err(_) => return bad(format!("log_min_duration_statement must be -1 (off) or more, not {min}")),
        };
        Ok(crate::logging::LogSettings {
            level,
            format,
            min_duration_statement,
            statement_parameters: self.log_statement_parameters,
            connections: self.log_connections,
            disconnections: self.log_disconnections,
            error_detail: self.log_error_detail,
        })
    }
}

impl ServerError {
    fn detail(&self) -> String {
        match self {
            ServerError::Config(m) => m.clone(),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_loops_default_to_a_thread_per_session() {
        let parse = |toml: &str| ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n{toml}")).unwrap();
        assert_eq!(parse("commit_mode = \"async\"").event_loops(), 0);
        assert_eq!(parse("commit_mode = \"sync\"").event_loops(), 0);
        assert_eq!(parse("").event_loops(), 0);
        assert_eq!(parse("commit_mode = \"async\"\nevent_loops = 2").event_loops(), 2);
        assert_eq!(parse("commit_mode = \"sync\"\nevent_loops = 3").event_loops(), 3);
        assert_eq!(parse("commit_mode = \"async\"\nevent_loops = 0").event_loops(), 0);
    }

    /// `[replication] standby_timeout_ms`: 30 s in async mode, never in
    /// sync mode, 0 is never.
    #[test]
    fn replication_standby_timeout() {
        let settings = |toml: &str| {
            ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n[replication]\n{toml}"))
                .unwrap()
                .replication
                .settings()
        };
        let active = "role = \"active\"\nlisten = \"127.0.0.1:5499\"\n";
        let timeout = |toml: &str| settings(&format!("{active}{toml}")).unwrap().unwrap().standby_timeout;
        assert_eq!(timeout(""), Some(std::time::Duration::from_secs(30)));
        assert_eq!(timeout("mode = \"sync\""), None);
        assert_eq!(timeout("mode = \"sync\"\nstandby_timeout_ms = 5000"), Some(std::time::Duration::from_secs(5)));
        assert_eq!(timeout("standby_timeout_ms = 0"), None);
        let e = settings("standby_timeout_ms = 10").unwrap_err().to_string();
        assert!(e.contains("role must be set"), "{e}");
    }

    /// `[replication] lease_ms` and `member`: checked, errors name the key.
    #[test]
    fn replication_lease_settings() {
        let settings = |toml: &str| {
            ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n[replication]\n{toml}"))
                .unwrap()
                .replication
                .settings()
        };
        let active = "role = \"active\"\nlisten = \"127.0.0.1:5499\"\n";
        let ok = settings(&format!("{active}lease_ms = 3000\nmember = \"a\"")).unwrap().unwrap();
        let lease = ok.lease.unwrap();
        assert_eq!((lease.duration.as_millis(), lease.member.as_deref()), (3000, Some("a")));
        assert!(settings(active).unwrap().unwrap().lease.is_none());
        for (toml, says) in [
            (format!("{active}lease_ms = 100"), "minimum"),
            (format!("{active}member = \"a\""), "lease_ms"),
            ("lease_ms = 3000".to_owned(), "role must be set"),
            ("role = \"standby\"\nprimary = \"h:1\"\nlisten = \"nope\"".to_owned(), "listen"),
        ] {
            let e = settings(&toml).unwrap_err().to_string();
            assert!(e.contains(says), "{toml}: {e}");
        }
        let standby = settings("role = \"standby\"\nprimary = \"h:1\"\nlisten = \"127.0.0.1:5499\"").unwrap().unwrap();
        assert!(matches!(standby.role, ReplicationRole::Standby { listen: Some(_), .. }));
    }

    /// The example parses as shipped and with its [backend] section
    /// uncommented (one of the two password sources).
    #[test]
    fn the_example_config_parses() {
        let text = include_str!("../pgtier.example.toml");
        let shipped = ServerConfig::from_toml_str(text).unwrap();
        assert!(shipped.backend.is_none() && shipped.deprecations().is_empty());
        let mut in_backend = false;
        let uncommented: String = text
            .lines()
            .map(|line| {
                in_backend = match line {
                    "# [backend]" => true,
                    "" => false,
                    _ => in_backend,
                };
                let live = in_backend
                    && !line.starts_with("# password_env")
                    && (line.starts_with("# [") || line.contains(" = "));
                let line = if live { &line[2..] } else { line };
                format!("{line}\n")
            })
            .collect();
        let config = ServerConfig::from_toml_str(&uncommented).unwrap();
        let backend = config.backend_config().unwrap().unwrap();
        assert_eq!(backend.url.as_deref(), Some("postgresql://app@db-host:5432/app"));
        assert_eq!((backend.sslmode, backend.pool_size), (Some(pgtier_backend::SslMode::VerifyFull), Some(4)));
        assert!(backend.password_file.is_some() && backend.password_env.is_none());
    }

    #[test]
    fn the_tier_section_is_checked_key_by_key() {
        let parse = |toml: &str| ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n[tier]\n{toml}")).unwrap();
        assert!(parse("").tier.to_tier_config(Path::new("d")).unwrap().is_none(), "off without size");
        let (config, mode) = parse("size = \"1GB\"\nmode = \"write-back\"\nadmission = \"all\"")
            .tier
            .to_tier_config(Path::new("/data"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (config.size, config.path.clone(), mode),
            (1 << 30, "/data/flash.tier".into(), pgtier_cache::TierMode::WriteBack)
        );
        assert_eq!((config.region_size, config.admission), (16 << 20, pgtier_cache::Admission::All));
        for (toml, key) in [
            ("path = \"f\"", "size"),
            ("size = \"lots\"", "size"),
            ("size = \"1MB\"", "size"),
            ("size = \"1GB\"\nmode = \"dirty\"", "mode"),
            ("size = \"1GB\"\ndirect_io = \"yes\"", "direct_io"),
            ("size = \"1GB\"\nregion_size = \"3MB\"", "region_size"),
            ("size = \"64MB\"\nregion_size = \"32MB\"", "size"),
            ("size = \"1GB\"\nadmission = \"first\"", "admission"),
            ("size = \"1GB\"\nmean_record_bytes = 1", "mean_record_bytes"),
            ("size = \"1GB\"\nlocal_tables = \"64MB\"", "local_tables"),
        ] {
            let e = parse(toml).tier.to_tier_config(Path::new("d")).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("[tier]"), "{toml}: {e}");
        }
        let local = parse("size = \"1GB\"\nmode = \"write-back\"\nlocal_tables = \"64MB\"").tier;
        assert!(local.to_tier_config(Path::new("d")).is_ok());
        assert_eq!(local.local_tables_budget().unwrap(), Some(64 << 20));
        for toml in ["local_tables = \"64MB\"", "size = \"1GB\"\nmode = \"write-back\"\nlocal_tables = \"many\""] {
            let e = parse(toml).tier.local_tables_budget().unwrap_err().to_string();
            assert!(e.contains("local_tables") && e.contains("[tier]"), "{toml}: {e}");
        }
        assert!(ServerConfig::from_toml_str("data_dir = \"d\"\n[tier]\nsise = \"1GB\"").is_err(), "unknown key");
    }

    #[test]
    fn the_cache_section_is_checked_key_by_key() {
        let parse = |toml: &str| ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n[cache]\n{toml}")).unwrap();
        let config = parse("memory_budget = \"64MB\"\nload_parallel = 3").cache.to_cache_config().unwrap();
        assert_eq!((config.memory_budget, config.load_parallel, config.high_watermark), (Some(64 << 20), 3, 0.9));
        let default = ServerConfig::from_toml_str("data_dir = \"d\"").unwrap().cache.to_cache_config().unwrap();
        assert_eq!((default.memory_budget, default.aging_interval.as_millis()), (Some(512 << 20), 1000));
        assert_eq!(default.sequence_block, pgtier_cache::DEFAULT_SEQUENCE_BLOCK);
        assert_eq!(parse("sequence_block = 500").cache.to_cache_config().unwrap().sequence_block, 500);
        for (toml, key) in [
            ("memory_budget = \"lots\"", "memory_budget"),
            ("memory_budget = \"0\"", "memory_budget"),
            ("high_watermark = 1.5", "high_watermark"),
            ("low_watermark = 0.0", "low_watermark"),
            ("low_watermark = 0.95", "low_watermark"),
            ("aging_interval_ms = 0", "aging_interval_ms"),
            ("load_parallel = 0", "load_parallel"),
            ("awt_apply_connections = 0", "awt_apply_connections"),
            ("awt_node = \"a b\"", "awt_node"),
            ("awt_node = \"node_1\"", "awt_node"),
            ("awt_node = \"Node1\"", "awt_node"),
            ("awt_stall_timeout_s = 0", "awt_stall_timeout_s"),
            ("awt_retained_wal_max = \"10kB\"", "awt_retained_wal_max"),
            ("awt_batch_delay_ms = 5000", "awt_batch_delay_ms"),
            ("sequence_block = 0", "sequence_block"),
        ] {
            let e = parse(toml).cache.to_cache_config().unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("[cache]"), "{toml}: {e}");
        }
        assert!(
            ServerConfig::from_toml_str("data_dir = \"d\"\n[cache]\nbudget = 1").is_err(),
            "unknown keys are refused"
        );
    }

    #[test]
    fn the_log_section_is_checked_key_by_key() {
        let parse = |toml: &str| {
            ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n[auth]\nmethod = \"trust\"\n[log]\n{toml}"))
                .unwrap()
        };
        assert!(parse("").validate().is_ok());
        let default = parse("").log.settings().unwrap();
        assert_eq!(default.level, tracing::level_filters::LevelFilter::INFO);
        assert_eq!(default.format, crate::logging::LogFormat::Text);
        assert!(default.min_duration_statement.is_none() && !default.statement_parameters && !default.error_detail);
        assert!(default.connections && default.disconnections);
        let set = parse("level = \"debug\"\nformat = \"json\"\nlog_min_duration_statement = 0").log.settings().unwrap();
        assert_eq!(
            (set.format, set.min_duration_statement),
            (crate::logging::LogFormat::Json, Some(std::time::Duration::ZERO))
        );
        for (toml, key) in [
            ("level = \"verbose\"", "level"),
            ("level = \"INFO\"", "level"),
            ("format = \"xml\"", "format"),
            ("log_min_duration_statement = -2", "log_min_duration_statement"),
            ("log_min_duration_statement = 3000000000", "log_min_duration_statement"),
        ] {
            let config = parse(toml);
            let e = config.log.settings().unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("[log]"), "{toml}: {e}");
            assert!(config.validate().is_err(), "{toml}: refused at startup");
        }
        assert!(ServerConfig::from_toml_str("data_dir = \"d\"\n[log]\nlevel_x = 1").is_err(), "unknown key");
    }

    #[test]
    fn deprecated_passthrough_keys_are_aliases() {
        let parse = |toml: &str| ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n{toml}")).unwrap();
        let old = parse("[passthrough]\nmode = \"all\"\nbackend_url = \"postgresql://u:pw@h/db\"\npool_size = 2\n");
        let merged = old.backend_config().unwrap().unwrap();
        assert_eq!((merged.url.as_deref(), merged.pool_size), (Some("postgresql://u:pw@h/db"), Some(2)));
        assert_eq!(old.deprecations().len(), 2);
        assert!(!format!("{old:?}").contains(":pw@"), "{old:?}");
        let mixed = parse("[backend]\npassword_env = \"P\"\n[passthrough]\nbackend_url = \"postgresql://u@h/db\"\n");
        let merged = mixed.backend_config().unwrap().unwrap();
        assert_eq!((merged.url.as_deref(), merged.password_env.as_deref()), (Some("postgresql://u@h/db"), Some("P")));
        // A lone old pool_size names no backend (it was allowed with passthrough off).
        assert!(parse("[passthrough]\npool_size = 2\n").backend_config().unwrap().is_none());
        assert!(parse("").backend_config().unwrap().is_none());
    }
}
