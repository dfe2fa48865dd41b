//! PostgreSQL client side of pgtier (catalog import, binary COPY, load
//! snapshots), and the private PostgreSQL clusters that
//! tests, benchmarks and demos run against. See README.md for what this crate
//! guarantees (no orphaned servers, never PostgreSQL as root).

pub mod backend_config;
mod backend_error;
mod binaries;
pub mod catalog;
mod cgroup;
mod cluster;
pub mod connect;
pub mod copy_out;
mod error;
pub mod harness;
pub mod managed;
pub mod memory_limit;
mod os_user;
pub mod read_throttle;
pub mod replication;
mod shared;
pub mod snapshot;
mod template;

pub use backend_config::{BackendConfig, BackendConfigError, ConnectParams, SslMode};
pub use backend_error::BackendError;
pub use connect::{ConnectError, connect, connect_backend, redact_url};
pub use error::{HarnessError, INSTALL_HINT};
pub use harness::{ClusterOptions, PrivateCluster, find_server_binaries, shared_cluster};
