//! One consistent PostgreSQL state for parallel loads, and cancelling them.
//!
//! The leader opens a REPEATABLE READ READ ONLY transaction and exports its
//! snapshot (`pg_export_snapshot()`); each further connection opens the same
//! kind of transaction and adopts it (`SET TRANSACTION SNAPSHOT`), so every
//! stream of a `LOAD ... PARALLEL n` sees exactly the rows the leader sees,
//! whatever commits meanwhile. The exported snapshot can only be adopted
//! while the leader's transaction is open: keep the [`ExportedSnapshot`]
//! until every follower has joined.
//!
//! [`Cancel`] stops a load from another thread: it sets a flag that
//! [`crate::copy_out::CopyReader`] checks before every row, and sends
//! PostgreSQL a cancel request for every registered connection so a COPY
//! that is waiting on the server stops too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use postgres::{CancelToken, Client, IsolationLevel, NoTls, Transaction};

use crate::backend_error::BackendError;

/// The leader's transaction and the id of the snapshot it exported.
pub struct ExportedSnapshot<'c> {
    transaction: Transaction<'c>,
    id: String,
}

impl<'c> ExportedSnapshot<'c> {
    /// Opens a REPEATABLE READ READ ONLY transaction on `client` and exports its snapshot.
    pub fn export(client: &'c mut Client) -> Result<ExportedSnapshot<'c>, BackendError> {
        let mut transaction = begin_repeatable_read(client)?;
        let row = transaction
            .query_one("SELECT pg_export_snapshot()", &[])
            .map_err(|error| BackendError::from_postgres("pg_export_snapshot()", &error))?;
        let id: String = row.try_get(0).map_err(|error| BackendError::from_postgres("pg_export_snapshot()", &error))?;
        Ok(ExportedSnapshot { transaction, id })
    }

    /// The snapshot id, e.g. `00000003-0000001B-1`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The leader's own transaction: it reads the same state as the followers
    /// (run the catalog import and one COPY stream in it).
    pub fn transaction(&mut self) -> &mut Transaction<'c> {
        &mut self.transaction
    }

    /// Ends the leader's transaction (read only: nothing to commit).
    pub fn finish(self) -> Result<(), BackendError> {
        self.transaction
            .commit()
            .map_err(|error| BackendError::from_postgres("ending the snapshot transaction", &error))
    }
}

/// Opens a REPEATABLE READ READ ONLY transaction on `client` that sees the
/// snapshot `id` exported by another session (still open).
pub fn join_snapshot<'c>(client: &'c mut Client, id: &str) -> Result<Transaction<'c>, BackendError> {
    // The id is interpolated into SQL: accept only what PostgreSQL produces.
    let well_formed =
        !id.is_empty() && id.len() <= 64 && id.bytes().all(|byte| byte.is_ascii_hexdigit() || byte == b'-');
    if !well_formed {
        return Err(BackendError::InvalidSnapshot { id: id.to_owned() });
    }
    let mut transaction = begin_repeatable_read(client)?;
    transaction
        .batch_execute(&format!("SET TRANSACTION SNAPSHOT '{id}'"))
        .map_err(|error| BackendError::from_postgres("SET TRANSACTION SNAPSHOT", &error))?;
    Ok(transaction)
}

fn begin_repeatable_read(client: &mut Client) -> Result<Transaction<'_>, BackendError> {
    client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(|error| BackendError::from_postgres("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", &error))
}

/// A cancellation switch shared by every stream of one load. Cloning shares it.
#[derive(Clone, Default)]
pub struct Cancel {
    inner: Arc<CancelInner>,
}

#[derive(Default)]
struct CancelInner {
    cancelled: AtomicBool,
    tokens: Mutex<Vec<CancelToken>>,
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Relaxed)
    }

    /// Registers a connection whose running statement [`Self::cancel`] must
    /// stop. Registering after the cancel cancels at once.
    pub fn register(&self, token: CancelToken) {
        let mut tokens = self.inner.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_cancelled() {
            drop(tokens);
            let _ = token.cancel_query(NoTls);
            return;
        }
        tokens.push(token);
    }

    /// Sets the flag and asks PostgreSQL to cancel the statement running on
    /// each registered connection. Blocking (one short connection per token):
    /// call it from a plain thread, not from inside an async runtime. Returns
    /// how many cancel requests could not be delivered (the flag still stops
    /// the readers at their next row).
    pub fn cancel(&self) -> usize {
        let tokens = {
            let mut tokens = self.inner.tokens.lock().unwrap_or_else(PoisonError::into_inner);
            self.inner.cancelled.store(true, Ordering::Relaxed);
            std::mem::take(&mut *tokens)
        };
        tokens.iter().filter(|token| token.cancel_query(NoTls).is_err()).count()
    }

    /// Runs `work` while a watcher thread cancels as soon as `asked` says
    /// so (a session's CancelRequest, a benchmark's Ctrl-C), polling every
    /// [`CANCEL_POLL`]; the watcher ends with `work`. Returns `work`'s result
    /// and whether the watcher cancelled (an error after that is the
    /// cancel's doing).
    pub fn when<R>(&self, asked: impl Fn() -> bool + Sync, work: impl FnOnce() -> R) -> (R, bool) {
        let done = AtomicBool::new(false);
        let tripped = AtomicBool::new(false);
        let result = std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    if asked() {
                        tripped.store(true, Ordering::Release);
                        self.cancel();
                        return;
                    }
                    std::thread::sleep(CANCEL_POLL);
                }
            });
            let result = work();
            done.store(true, Ordering::Release);
            result
        });
        (result, tripped.load(Ordering::Acquire))
    }
}

/// How often [`Cancel::when`] looks at its condition: well under a human's
/// patience, and a cheap check.
pub const CANCEL_POLL: Duration = Duration::from_millis(20);

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel").field("cancelled", &self.is_cancelled()).finish()
    }
}
