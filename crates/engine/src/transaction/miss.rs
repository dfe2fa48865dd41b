//! The miss path: an application transaction's lookup that found nothing
//! asks the table's miss hook (seams.rs), and after the hook loaded rows
//! retries once at a fresh snapshot. What the hook asks the transaction
//! to hold (the cache's pin on the instance it loaded) is kept until the
//! transaction ends, so the retry finds the rows the hook put there.
//!
//! READ COMMITTED after a load: the statement continues as if it had
//! started after the hook's commit (its snapshot is refreshed, for the
//! retried lookup and whatever the statement reads after it), so it sees
//! the loaded rows. Only lookups that found nothing take this path; a hit
//! costs nothing more than before. The hook runs with no internal lock held;
//! the calling transaction keeps its row and table locks meanwhile.
//!
//! A read may instead be answered with rows the hook keeps elsewhere
//! (`MissResolution::Answer`, miss_rows.rs): nothing is inserted and the
//! snapshot stays; the lookup looks again and finds them there.

use std::sync::Arc;

use super::{Transaction, encode_pk};
use crate::db::Database;
use crate::error::{EngineError, Result};
use crate::origin::Origin;
use crate::schema::TableId;
use crate::seams::{Miss, MissHook, MissIntent, MissResolution};
use crate::table::TableStore;
use crate::types::Value;

impl Transaction {
    /// The hook to ask about a miss on `store`: only application
    /// transactions ask, and only tables with a hook have one.
    #[inline]
    pub(super) fn miss_hook(&self, store: &TableStore) -> Option<Arc<dyn MissHook>> {
        if self.origin != Origin::Application || !store.hooks.has_miss_hook() {
            return None;
        }
        store.hooks.miss_hook()
    }

    /// Calls `hook`; true when the lookup should look again: the hook
    /// loaded rows, and then the statement snapshot has been refreshed for
    /// the one retry, or (a read) it answered with rows kept for this
    /// statement.
    #[cold]
    pub(super) fn resolve_miss(&mut self, hook: &dyn MissHook, miss: Miss<'_>, intent: MissIntent) -> Result<bool> {
        debug_assert_eq!(self.origin, Origin::Application, "only application transactions call miss hooks");
        let db = Database::lent(Arc::clone(&self.db));
        let Some(resolution) = crate::seams::enter_hook(|| hook.on_miss(&db, miss, intent)) else { return Ok(false) };
        match resolution? {
            MissResolution::NotFound => return Ok(false),
            MissResolution::Retry { hold } => self.miss_holds.extend(hold),
            MissResolution::Answer(answer) => {
                // "No row" for a write would be a wrong answer (an UPDATE
                // of a row that exists updating nothing): refused instead.
                if intent == MissIntent::Write {
                    return Err(EngineError::hook(
                        "XX000",
                        "a miss hook answered a write with rows not in memory",
                        None,
                    ));
                }
                self.add_miss_answer(answer)?;
                return Ok(true);
            }
        }
        self.snapshot = self.db.txns.refresh_snapshot(self.id);
        self.miss_rows.clear();
        self.fresh_snapshot = false;
        Ok(true)
    }

    /// Runs `attempt` (a lookup of primary key `key` in `table`; false: no
    /// row) and, if it found nothing, asks the hook and runs it once more.
    /// Errors abort the transaction. `attempt` has one call site, so it
    /// inlines as it did before the hook, and its result is matched, not
    /// passed on (moving a whole `Result<_, EngineError>` costs a copy on
    /// every hit).
    #[inline(always)]
    pub(super) fn retrying_key_miss(
        &mut self,
        table: TableId,
        key: &[Value],
        intent: MissIntent,
        mut attempt: impl FnMut(&mut Transaction) -> Result<bool>,
    ) -> Result<bool> {
        let mut asked = false;
        loop {
            match attempt(self) {
                Ok(true) => return Ok(true),
                Ok(false) => match self.retry_key(&mut asked, table, key, intent) {
                    Ok(true) => continue,
                    Ok(false) => return Ok(false),
                    Err(e) => return self.check(Err(e)),
                },
                Err(e) => return self.check(Err(e)),
            }
        }
    }

    /// After a lookup of `key` found nothing (or a writer's recheck said
    /// no): true to look once more. Asks only the first time (`asked`).
    #[cold]
    pub(super) fn retry_key(
        &mut self,
        asked: &mut bool,
        table: TableId,
        key: &[Value],
        intent: MissIntent,
    ) -> Result<bool> {
        if std::mem::replace(asked, true) {
            return Ok(false);
        }
        self.key_missed(table, key, intent)
    }

    /// For a lookup of primary key `key` in `table` that found nothing: asks
    /// the hook unless the miss is this transaction's own doing or the row
    /// is visible (see `TableStore::miss_may_be_loaded`). True: retry the
    /// lookup. A read inside rows a hook answered with this statement
    /// looks again (among them) without asking.
    #[cold]
    pub(super) fn key_missed(&mut self, table: TableId, key: &[Value], intent: MissIntent) -> Result<bool> {
        let Some(store) = self.cat.store(table).cloned() else { return Ok(false) };
        let Some(hook) = self.miss_hook(&store) else { return Ok(false) };
        let Some(hash) = encode_pk(&store, key, &mut self.s.probe)? else { return Ok(false) };
        if !store.miss_may_be_loaded(hash, &self.s.probe, self.id, self.snapshot, &mut self.s.scratch) {
            return Ok(false);
        }
        if intent == MissIntent::Read && self.answered_key_covered(&store, key) {
            return Ok(true);
        }
        self.resolve_miss(&*hook, Miss::Key { table, key }, intent)
    }
}
