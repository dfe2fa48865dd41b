//! When a commit is acknowledged: the choice a transaction makes at begin
//! (or changes before it commits) and the database's default.

/// When a commit is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitMode {
    /// After the WAL record is on stable storage (group commit: concurrent
    /// committers share one fdatasync). Visible to others only then.
    Sync,
    /// Once the record is in the WAL buffer; the WAL writes it within
    /// `WalConfig::async_flush_interval`. A crash may lose that suffix.
    Async,
}
