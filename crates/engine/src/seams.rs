//! Seams for the cache: what the engine calls up through (a key miss the
//! cache may resolve by loading rows; a write the cache may refuse; a
//! commit another system must take first). The engine knows nothing of
//! PostgreSQL; the cache installs implementations at every open (nothing
//! here is persisted). Each table keeps its hooks in its `HookSlots`
//! (hook_slots.rs), with the switches that make them cost one flag test
//! when off; this module gives those slots their types.

use std::sync::Arc;

use crate::db::Database;
use crate::error::Result;
use crate::hook_slots::{Hook, HookSlots};
use crate::schema::{IndexId, TableId, TableSchema};
use crate::stream::RowChange;
use crate::transaction::Transaction;
use crate::types::Value;

/// What an application read looked for and did not find.
#[derive(Clone, Copy, Debug)]
pub enum Miss<'a> {
    /// A point read / write by primary key found no row (also a foreign
    /// key's parent looked up by its primary key).
    Key { table: TableId, key: &'a [Value] },
    /// An equality scan on the leading columns of an index (lower == upper
    /// == Included(prefix)) found no row (also a foreign key's parent
    /// looked up through a UNIQUE index: `index` is that index).
    Prefix { table: TableId, index: IndexId, prefix: &'a [Value] },
}

impl Miss<'_> {
    pub fn table(&self) -> TableId {
        match *self {
            Miss::Key { table, .. } | Miss::Prefix { table, .. } => table,
        }
    }
}

/// Something a miss hook hands the calling transaction to keep until it
/// ends (commit or rollback): the cache's pin on the instance it loaded,
/// which aging may not evict while the transaction that missed runs.
pub type MissHold = Box<dyn std::any::Any + Send + Sync>;

/// Why the engine looked: to read, or to write (update, delete, lock, a
/// new row's foreign key). A write needs the rows in memory; a read may be
/// answered from elsewhere (`MissResolution::Answer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissIntent {
    Read,
    Write,
}

/// What a miss hook did about a miss.
pub enum MissResolution {
    /// Nothing that could answer the lookup: its "no row" stands.
    NotFound,
    /// Rows that may answer the lookup are committed: the engine retries it
    /// once at a fresh snapshot, and keeps `hold` until the calling
    /// transaction ends.
    Retry { hold: Option<MissHold> },
    /// Only for a read: committed rows kept outside memory (the cache's
    /// flash tier) that answer it without being inserted. The statement
    /// reads them as if they were in their tables until its snapshot
    /// changes (a new statement, or a write's retry); see [`MissAnswer`].
    Answer(MissAnswer),
}

/// Rows a hook answers a read miss with, and what they cover: for each
/// cover, *every* row of its table whose `columns` equal its `values` is
/// among `rows` (none beyond them exists), so a later lookup within a cover
/// is answered from them alone, without asking the hook again.
///
/// The hook vouches that these rows are the latest committed state of
/// what they cover and that memory holds none of it at the calling
/// statement's snapshot (the engine looks in its tables first, and only
/// a lookup they miss reads these).
#[derive(Debug, Default)]
pub struct MissAnswer {
    pub rows: Vec<(TableId, Vec<Value>)>,
    /// Rows already in their table's row format (`RowRef::bytes` of a row
    /// as it was stored, under the same table id), answered as they are:
    /// the engine checks each against the layout, and skips the coercion
    /// and encoding `rows` need.
    pub images: Vec<(TableId, Vec<u8>)>,
    pub covers: Vec<MissCover>,
}

/// See [`MissAnswer`].
#[derive(Debug)]
pub struct MissCover {
    pub table: TableId,
    /// Column positions of `table`.
    pub columns: Vec<usize>,
    pub values: Vec<Value>,
}

/// Resolves misses of one table (the cache's dynamic load).
pub trait MissHook: Send + Sync {
    /// Called when an application read finds nothing. `Retry`: the hook
    /// committed rows that may answer the lookup (or found them committed
    /// meanwhile). An error fails the statement (and, like any error,
    /// aborts the calling transaction).
    ///
    /// The one retry is why a hold exists: rows the hook loaded and someone
    /// removed again before the retry (the cache's aging, evicting for
    /// memory) would make the lookup answer "no row" for a row PostgreSQL
    /// has. The hook keeps them in place until the hold is dropped.
    ///
    /// `db` is a handle on the same database for the hook's own
    /// transactions, which must not have origin `Application` (the engine
    /// never calls a hook for them, so a hook is never re-entered, and they
    /// never wait for a row lock: see [`crate::Transaction`]). The calling
    /// application transaction stays open meanwhile, holding its locks.
    ///
    /// `Answer` is taken only for `MissIntent::Read` (for a write the
    /// engine treats it as `NotFound`: a write needs the rows in memory).
    fn on_miss(&self, db: &Database, miss: Miss<'_>, intent: MissIntent) -> Result<MissResolution>;

    /// Called before a row goes in under a parent this hook's table holds
    /// (`lookup`: the parent as the new row's foreign key names it): the
    /// parent is in memory, and must stay there until the row is in. Found
    /// present and then evicted (the cache's aging) before the insert, it
    /// would be loaded again after the new row is in place, and a row of
    /// the loaded instance with the new row's key (PostgreSQL's 23505)
    /// would meet the lock of the very transaction waiting for the load.
    /// What it returns is kept until the calling transaction ends; the
    /// engine then looks at the parent again. Default: nothing to hold.
    fn hold_present(&self, db: &Database, lookup: Miss<'_>) -> Result<Option<MissHold>> {
        let _ = (db, lookup);
        Ok(None)
    }
}

/// Decides whether application transactions may write a table now: the
/// cache refuses writes to READONLY cache groups (25006), and to AWT groups
/// while write-through is further behind than its retained-WAL bound (53400).
pub trait WriteGuard: Send + Sync {
    /// Called once per application transaction and table, before its first
    /// write (insert, update, delete, SELECT FOR UPDATE) to the table; an
    /// error fails that statement.
    fn check_write(&self, table: &TableSchema) -> Result<()>;
}

/// Commits an application transaction's changes to its tables somewhere
/// else before the engine commits them: SWT write-through, where
/// PostgreSQL commits first and the cache after.
pub trait CommitParticipant: Send + Sync {
    /// Called once at the commit of an application transaction that changed
    /// a table this participant is installed on: after its last statement,
    /// before anything is logged, with its row locks held (so no other
    /// writer can come between the two commits). `changes`: its final
    /// changes to this participant's tables, in the order the rows were
    /// first written. The participant may write its own bookkeeping rows
    /// through `txn` (to tables without a participant); they commit with it.
    ///
    /// Ok(ticket): the participant committed; the engine commits now and
    /// then calls [`CommitParticipant::finished`] with the ticket. Err: the
    /// engine rolls the transaction back and its commit returns the error.
    fn commit_first(&self, txn: &mut Transaction, changes: &[RowChange]) -> Result<u64>;

    /// After the engine's own commit of a transaction this participant
    /// committed first (rolled back already when `committed` is false: the
    /// engine failed after the participant succeeded, and the two sides now
    /// disagree until the participant repairs it).
    fn finished(&self, ticket: u64, committed: bool);
}

/// The typed side of a table's hook slots (`hook_slots` holds them
/// opaquely, so the storage layer does not depend on these traits).
impl HookSlots {
    pub(crate) fn miss_hook(&self) -> Option<Arc<dyn MissHook>> {
        self.object(Hook::Miss)
    }

    pub(crate) fn set_miss_hook(&self, hook: Option<Arc<dyn MissHook>>) {
        self.set_object(Hook::Miss, hook);
    }

    pub(crate) fn write_guard(&self) -> Option<Arc<dyn WriteGuard>> {
        self.object(Hook::WriteGuard)
    }

    pub(crate) fn set_write_guard(&self, guard: Option<Arc<dyn WriteGuard>>) {
        self.set_object(Hook::WriteGuard, guard);
    }

    pub(crate) fn participant(&self) -> Option<Arc<dyn CommitParticipant>> {
        self.object(Hook::Participant)
    }

    pub(crate) fn set_participant(&self, participant: Option<Arc<dyn CommitParticipant>>) {
        self.set_object(Hook::Participant, participant);
    }
}

thread_local! {
    /// Set while this thread runs a miss hook (see `enter_hook`).
    static IN_MISS_HOOK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` (a hook call) marked as inside a miss hook; None if this thread
/// is already inside one. That cannot happen through the engine's own rule
/// (hooks run only for application transactions, and a hook's transactions
/// have other origins); a hook that begins an application transaction and
/// misses in it breaks the rule, and is not re-entered.
pub(crate) fn enter_hook<R>(f: impl FnOnce() -> R) -> Option<R> {
    if IN_MISS_HOOK.with(std::cell::Cell::get) {
        return None;
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_MISS_HOOK.with(|c| c.set(false));
        }
    }
    IN_MISS_HOOK.with(|c| c.set(true));
    let _reset = Reset;
    Some(f())
}
