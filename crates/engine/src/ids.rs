//! The u64s the engine's modules pass each other, typed, so a transaction
//! id cannot go where a commit timestamp is meant (redb's `TransactionId`
//! is the model). Each is `#[repr(transparent)]` over a u64 and its methods
//! are `#[inline]`: the types cost nothing at run time. The public API
//! hands them out too (`Transaction::id`, `CommitInfo::commit_ts`,
//! `CommittedTxn::commit_ts`), so consumers of the commit stream keep the
//! distinction; `get()` gives the number.
//!
//! Both a transaction id and a commit ts fit in a version's word below its
//! flag bits (`version::TS_MASK`); which of the two a word holds depends on
//! its UNCOMMITTED flag (`version::owner_of`, `version::commit_ts_of`).

use std::fmt;

/// A transaction: `(sequence << SLOT_BITS) | slot` (txn_slots.rs), never reused
/// and never 0. An uncommitted version's word holds its owner's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct TxnId(u64);

impl TxnId {
    /// No transaction (ids are never 0): reading as it sees only what
    /// committed, no uncommitted version being its own.
    pub(crate) const NOBODY: TxnId = TxnId(0);

    #[inline]
    pub(crate) const fn new(raw: u64) -> TxnId {
        TxnId(raw)
    }

    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// Shown as the number, as in PostgreSQL's deadlock and lock-wait details.
impl fmt::Display for TxnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A commit timestamp: commits are numbered in commit order, which is WAL
/// order (both are assigned under the commit lock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct CommitTs(u64);

impl CommitTs {
    /// The ts of every version loaded at recovery: older than any snapshot.
    pub(crate) const RECOVERED: CommitTs = CommitTs(1);

    #[inline]
    pub(crate) const fn new(raw: u64) -> CommitTs {
        CommitTs(raw)
    }

    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The ts the next commit gets.
    #[inline]
    pub(crate) const fn next(self) -> CommitTs {
        CommitTs(self.0 + 1)
    }
}

/// The commit ts a statement reads at: it sees the commits at or before
/// it. The GC horizon is one too: the oldest snapshot anyone may still
/// read at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Snapshot(u64);

impl Snapshot {
    #[inline]
    pub(crate) const fn new(raw: u64) -> Snapshot {
        Snapshot(raw)
    }

    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// True when a version committed at `ts` is old enough for it.
    #[inline]
    pub(crate) const fn sees(self, ts: CommitTs) -> bool {
        ts.0 <= self.0
    }
}

impl fmt::Display for CommitTs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
