//! PostgreSQL client side of pgtier, and the private PostgreSQL clusters that
//! tests, benchmarks and demos run against. See README.md for what this crate
//! guarantees (no orphaned servers, never PostgreSQL as root).

mod binaries;
mod cluster;
pub mod connect;
mod error;
pub mod harness;
pub mod managed;
mod os_user;
mod shared;
mod template;

pub use connect::{ConnectError, connect, redact_url};
pub use error::{HarnessError, INSTALL_HINT};
pub use harness::{ClusterOptions, PrivateCluster, find_server_binaries, shared_cluster};
