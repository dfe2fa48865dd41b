//! The result file: what one `pgtier bench` run writes as JSON, and what
//! reports, charts and `bench compare` read back. Changing a field here changes
//! every consumer; add fields with `#[serde(default)]` so older files still load.

use serde::{Deserialize, Serialize};

/// Latency distribution of one transaction type, in microseconds, from an
/// HdrHistogram (3 significant digits).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyUs {
    pub min: f64,
    pub avg: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// Outcome counts and latency of one transaction type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TxnStats {
    /// Spec name, e.g. "GET_SUBSCRIBER_DATA".
    pub name: String,
    /// Completed without error (including "not found", which TATP counts as a
    /// valid execution). These make up MQTh and the latency distribution.
    pub executed: u64,
    /// Of `executed`, those that found/affected the rows they looked for.
    pub found: u64,
    /// Acceptable errors (TATP: unique / foreign-key violations); excluded from
    /// MQTh and latency, counted apart.
    pub acceptable_errors: u64,
    /// found / (executed + acceptable_errors).
    pub success_ratio: f64,
    /// The spec's expected success ratio, for comparison in the report.
    pub spec_success_ratio: f64,
    /// Closed loop: from the start of each call. Open loop: from each
    /// transaction's intended start (what the application sees).
    pub latency_us: LatencyUs,
    /// Open loop only: from the intended start or the load generator's
    /// wake-up, whichever came later (its lateness not charged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_from_wake_us: Option<LatencyUs>,
}

/// Figures sampled from the system under test during the measure window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BackendFigures {
    /// What was sampled, e.g. "postgresql 15.18" or "pgtier engine".
    pub source: String,
    pub window_s: f64,
    pub commits: u64,
    pub commits_per_s: f64,
    pub wal_bytes: u64,
    pub wal_bytes_per_s: f64,
    /// Share (0..1) of sampled active-backend time spent waiting on WAL write /
    /// flush events: PostgreSQL's analog of Oracle's 'log file sync'.
    pub wal_wait_share: f64,
    /// CPU used by the server processes, in % of one core (200 = two cores).
    /// `None` when the processes are not visible (remote server).
    pub cpu_percent: Option<f64>,
    /// Number of wait-event samples taken.
    pub samples: u64,
    /// Client backends active on average (Oracle's "average active
    /// sessions"): active samples / samples.
    #[serde(default)]
    pub active_sessions: f64,
    /// Client backends waiting on WAL write/flush on average: the absolute
    /// counterpart of `wal_wait_share` (seconds of commit wait per second),
    /// which a share hides when there are fewer sessions.
    #[serde(default)]
    pub wal_wait_sessions: f64,
    /// CPU of the benchmark process's threads by component (`crate::cpu`):
    /// the clients, and pgtier's own threads when it runs in this process.
    #[serde(default)]
    pub process_cpu: Vec<CpuShare>,
}

/// CPU of one component of the benchmark process over a measure window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    /// `crate::cpu::Component::name`, e.g. "write-through".
    pub component: String,
    /// % of one core (200 = two cores).
    pub percent: f64,
    pub threads: u32,
}

/// Per-thread detail of one repetition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadStats {
    pub thread: u32,
    pub executed: u64,
    pub mqth: f64,
    pub latency_us: LatencyUs,
}

/// One measure window at one thread count.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Repetition {
    /// Successful (executed) transactions per second over the measure window.
    pub mqth: f64,
    pub transactions: Vec<TxnStats>,
    #[serde(default)]
    pub backend: Option<BackendFigures>,
    #[serde(default)]
    pub per_thread: Vec<ThreadStats>,
}

/// All repetitions at one thread count, and their summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Iteration {
    pub threads: u32,
    pub repetitions: Vec<Repetition>,
    pub mqth_mean: f64,
    pub mqth_min: f64,
    pub mqth_max: f64,
    pub mqth_stddev: f64,
    /// Per-transaction stats over all repetitions (histograms merged).
    pub transactions: Vec<TxnStats>,
}

/// How the run was configured: everything needed to reproduce it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub workload: String,
    /// Target description without secrets.
    pub target: String,
    pub subscribers: u64,
    pub min_subscriber_id: u64,
    pub max_subscriber_id: u64,
    /// "nurand" (spec default) or "uniform".
    pub key_distribution: String,
    /// `None` = closed loop (flooding); `Some(r)` = open loop at r txn/s total.
    pub rate_per_s: Option<f64>,
    pub duration_s: f64,
    pub ramp_up_s: f64,
    pub ramp_down_s: f64,
    pub repetitions: u32,
    pub durability: String,
    pub isolation: String,
    /// Every way this run departs from the workload spec.
    pub deviations: Vec<String>,
}

/// Machine the run was measured on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub hostname: String,
    pub cpus: u32,
    pub memory_gib: f64,
    pub os: String,
    pub kernel: String,
}

/// A whole `pgtier bench` run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub tool_version: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// Short label used in charts and comparisons (e.g. "postgresql").
    pub label: String,
    pub config: RunConfig,
    pub machine: MachineInfo,
    pub iterations: Vec<Iteration>,
}
