//! SWT write-through: an application transaction that changed tables of SWT
//! groups commits in PostgreSQL first, inside the cache's commit, and in
//! the cache only after PostgreSQL said yes; PostgreSQL's refusal rolls the
//! cache transaction back with PostgreSQL's SQLSTATE and message.
//!
//! [`Swt`] is the engine's commit participant on every SWT table. At a
//! commit (row locks held, so no other writer comes between the two
//! commits) it takes an apply *slot* — a PostgreSQL connection with a
//! number — and sends, in one PostgreSQL transaction and one round trip,
//! the transaction's row changes (the statements AWT uses) and a row of
//! `pgtier.swt_log`: the slot's next transaction number and the changed
//! rows' images. The same number goes into the slot's row of the local
//! table [`SLOTS_TABLE`], written by the application transaction itself.
//!
//! PostgreSQL is the system of record here, so the cache's own commit need
//! not wait for its WAL to reach the disk (it commits asynchronously): what a
//! crash takes from the cache, PostgreSQL has. After a crash, or when the
//! cache's commit failed after PostgreSQL's, or the connection broke while
//! COMMIT was under way, the slot's log in PostgreSQL is ahead of the local
//! number, and its rows say which rows those transactions changed.
//! Resolution reloads those rows' instances from PostgreSQL — already holding
//! every later change — and moves the local number up (DESIGN.md §3, "SWT
//! crash window"). It runs at open and whenever a slot's outcome is
//! unknown; SWT commits wait for it (and fail after a while with 57P03), so
//! no transaction writes over a row whose newest image the cache lacks.
//! Reads of those rows may show the older image until then, as they would
//! have before the lost commit. Log rows are deleted, a batch at a time in a
//! later commit of their slot, once the cache's commits they stand for are
//! durable.
//!
//! A statement that changes no row in PostgreSQL (the row is missing there:
//! changed behind pgtier's back) refuses the commit with P0002, and the
//! instance is reloaded from PostgreSQL in the background so a retry works
//! on PostgreSQL's rows.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use pgtier_backend::{ConnectParams, connect_backend};
use pgtier_engine::{
    ColumnDef, CommitMode, CommitParticipant, DataType, Database, EngineError, Origin, RowChange, RowOp, TableDef,
    Transaction, Value,
};
use postgres::Client;

use crate::apply::{Applied, Applier, RowStatement, apply_checked, row_statement, session_connection};
use crate::awt::LagHistogram;
use crate::backend_schema::{DEFINITION_CHANGED, NODE_NOT_OWNED};
use crate::drift::{check_clause, token_of, verify_group};
use crate::error::{CacheError, connection_error};
use crate::group::GroupKind;
use crate::instance::key_text;
use crate::load::{LoadOptions, RefreshReport};
use crate::node::{NodeIdentity, NodeObject};
use crate::registry::{GroupEntry, WHOLE_GROUP, quote_literal};

/// What SWT asks of the cache (`Cache` implements it). `Swt` holds it
/// weakly: the cache holds the `Swt`.
pub(crate) trait SwtHost: Send + Sync {
    fn database(&self) -> &Database;
    fn backend(&self) -> Option<&ConnectParams>;
    /// Every group now.
    fn group_entries(&self) -> Vec<Arc<GroupEntry>>;
    /// The group and index of table `name`, if a group holds it.
    fn table_of_group(&self, name: &str) -> Option<(Arc<GroupEntry>, usize)>;
    /// Group `name`'s entry (42704 when there is none).
    fn entry(&self, name: &str) -> Result<Arc<GroupEntry>, CacheError>;
    /// The root keys of group `name`'s instances cached now.
    fn cached_root_keys(&self, name: &str) -> Result<Vec<Vec<Value>>, CacheError>;
    /// REFRESH CACHE GROUP `name` (`Cache::refresh`).
    fn refresh(
        &self,
        name: &str,
        cached_keys: &[Vec<Value>],
        options: &LoadOptions,
    ) -> Result<RefreshReport, CacheError>;
    /// Reloads these instances of `entry`'s group from PostgreSQL, removing
    /// those it no longer has (`Cache::refresh_instances`).
    fn refresh_instances(&self, entry: &GroupEntry, keys: &[Vec<Value>]) -> Result<RefreshReport, CacheError>;
}

/// Local table: per slot, the counter of the last SWT transaction committed in the cache.
pub const SLOTS_TABLE: &str = "pgtier_swt_slots";

/// How long a commit waits for in-doubt resolution before it fails (57P03).
const READY_WAIT: Duration = Duration::from_secs(5);
/// How long the outcome check after a lost COMMIT waits for the old session's lock.
const OUTCOME_LOCK_TIMEOUT_MS: u32 = 5_000;

/// SWT figures (`pgtier_cache_propagation`, `pgtier status`, `/metrics`).
#[derive(Debug, Default)]
pub struct SwtStatus {
    /// Transactions committed in PostgreSQL and then in the cache.
    pub commits: AtomicU64,
    /// Commits PostgreSQL refused (rolled back in the cache with its error).
    pub refused: AtomicU64,
    /// Transactions found committed in PostgreSQL but not in the cache, and repaired.
    pub in_doubt_resolved: AtomicU64,
    /// Instances reloaded because PostgreSQL's rows differed from the cache's.
    pub repairs: AtomicU64,
    /// Time spent in PostgreSQL per commit (connect excluded).
    pub latency: LagHistogram,
    /// Groups whose tables changed in PostgreSQL (their commits are refused until resolved), with why.
    pub drifted: Mutex<BTreeMap<String, String>>,
    pub last_error: Mutex<Option<String>>,
}

/// One apply slot: a connection and its transaction numbers.
struct Slot {
    id: i32,
    /// The last transaction committed in the cache (durable or not).
    txn_id: i64,
    applier: Option<Applier>,
    /// Transactions committed in the cache whose WAL may not be durable
    /// yet, with the WAL end after their commit: their log rows stay.
    unconfirmed: VecDeque<(i64, u64)>,
    /// The newest transaction whose cache commit is known durable.
    durable: i64,
    /// Log rows up to this number are deleted (or being deleted).
    pruned_to: i64,
    /// The number (`InFlight`) of the commit the slot carries between PostgreSQL's commit and the cache's.
    commit: u64,
}

impl Slot {
    fn new(id: i32, txn_id: i64) -> Slot {
        Slot { id, txn_id, applier: None, unconfirmed: VecDeque::new(), durable: txn_id, pruned_to: txn_id, commit: 0 }
    }

    /// The statement deleting log rows whose cache commits are durable now
    /// (every [`PRUNE_EVERY`] transactions), or None.
    fn prune(&mut self, node: &NodeIdentity, durable_end: u64) -> Option<String> {
        while let Some(&(txn_id, wal_end)) = self.unconfirmed.front() {
            if wal_end > durable_end {
                break;
            }
            self.durable = txn_id;
            self.unconfirmed.pop_front();
        }
        if self.durable < self.pruned_to + PRUNE_EVERY {
            return None;
        }
        self.pruned_to = self.durable;
        Some(format!(
            "DELETE FROM pgtier.swt_log WHERE node = {} AND incarnation = {} AND slot = {} AND txn_id <= {}",
            quote_literal(&node.name),
            quote_literal(&node.incarnation),
            self.id,
            self.durable
        ))
    }
}

/// Log rows of a slot are deleted in batches of at least this many.
const PRUNE_EVERY: i64 = 64;

#[derive(Default)]
struct Slots {
    /// False until both sides' counters were read and every in-doubt slot resolved.
    ready: bool,
    idle: Vec<Slot>,
    /// Slots whose last transaction may have committed in PostgreSQL only.
    in_doubt: Vec<Slot>,
    /// Slots of transactions committed in PostgreSQL, awaiting the cache's commit.
    busy: HashMap<u64, Slot>,
    next_slot: i32,
    next_ticket: u64,
}

/// The commit participant of SWT tables (one per cache).
pub(crate) struct Swt {
    cache: Weak<dyn SwtHost>,
    node: NodeIdentity,
    slots: Mutex<Slots>,
    /// Commits under way (PostgreSQL may have them or not), by number, with
    /// the instances each marked: loads treat those as not in their snapshot.
    in_flight: Mutex<InFlight>,
    ready_changed: Condvar,
    resolver_running: AtomicBool,
    pub status: Arc<SwtStatus>,
}

impl Swt {
    pub fn new(cache: Weak<dyn SwtHost>, node: NodeIdentity) -> Swt {
        Swt {
            cache,
            node,
            slots: Mutex::new(Slots::default()),
            in_flight: Mutex::new(InFlight { next: 1, ..InFlight::default() }),
            ready_changed: Condvar::new(),
            resolver_running: AtomicBool::new(false),
            status: Arc::default(),
        }
    }

    /// Starts resolution in the background unless it is done or running.
    pub fn resolve_in_background(self: &Arc<Swt>) {
        {
            let slots = self.slots.lock();
            if slots.ready && slots.in_doubt.is_empty() {
                return;
            }
        }
        if self.resolver_running.swap(true, Ordering::AcqRel) {
            return;
        }
        let swt = Arc::downgrade(self);
        let spawned = std::thread::Builder::new().name("pgtier-swt-resolve".into()).spawn(move || {
            let mut backoff = Duration::from_millis(50);
            loop {
                let Some(strong) = swt.upgrade() else { return };
                let Some(cache) = strong.cache.upgrade() else { return };
                match strong.resolve(&*cache) {
                    Ok(()) => {
                        strong.resolver_running.store(false, Ordering::Release);
                        // A slot may have gone in doubt after the last look.
                        let again = !strong.slots.lock().in_doubt.is_empty();
                        if again && !strong.resolver_running.swap(true, Ordering::AcqRel) {
                            continue;
                        }
                        return;
                    }
                    Err(error) => *strong.status.last_error.lock() = Some(error.to_string()),
                }
                drop((strong, cache));
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        });
        if spawned.is_err() {
            self.resolver_running.store(false, Ordering::Release);
        }
    }

    /// Reads both sides' counters (first time), then repairs every slot
    /// whose PostgreSQL counter is ahead of the cache's.
    fn resolve(&self, cache: &dyn SwtHost) -> Result<(), CacheError> {
        let db = cache.database();
        let mut client = connect_backend(cache.backend().ok_or(CacheError::NoBackend)?)?;
        crate::backend_schema::ensure(&mut client)?;
        // This directory's log rows only: a name another directory owns is refused.
        crate::node::claim(&mut client, &self.node, false)?;
        // The slots to look at are fixed before PostgreSQL's log is read, so
        // the log covers whatever put them in doubt.
        let first = !self.slots.lock().ready;
        let mut pending: Vec<Slot> = if first {
            ensure_slots_table(db)?;
            let local = read_local_counters(db)?;
            let ids: std::collections::BTreeSet<i32> =
                local.keys().chain(read_log(&mut client, &self.node)?.keys()).copied().collect();
            ids.into_iter().map(|id| Slot::new(id, local.get(&id).copied().unwrap_or(0))).collect()
        } else {
            std::mem::take(&mut self.slots.lock().in_doubt)
        };
        // A session of an earlier connection (or process) may still be
        // committing a slot's next transaction: wait until it is over.
        for slot in &pending {
            if let Err(error) = settle(&mut client, &self.node, slot.id, slot.txn_id + 1) {
                if !first {
                    // Still in doubt; a first look starts over from both sides' numbers.
                    self.slots.lock().in_doubt.extend(pending);
                }
                return Err(error);
            }
        }
        let remote = read_log(&mut client, &self.node)?;
        let mut failure = None;
        let mut resolved = Vec::with_capacity(pending.len());
        for mut slot in pending.drain(..) {
            if failure.is_some() {
                resolved.push(Err(slot));
                continue;
            }
            let slot_remote = remote.get(&slot.id);
            match self.repair_slot(cache, &mut slot, slot_remote) {
                Ok(()) => resolved.push(Ok(slot)),
                Err(error) => {
                    failure = Some(error);
                    resolved.push(Err(slot));
                }
            }
        }
        let mut slots = self.slots.lock();
        for outcome in resolved {
            match outcome {
                Ok(slot) => {
                    slots.next_slot = slots.next_slot.max(slot.id + 1);
                    slots.idle.push(slot);
                }
                Err(slot) => {
                    slots.next_slot = slots.next_slot.max(slot.id + 1);
                    slots.in_doubt.push(slot);
                }
            }
        }
        if let Some(error) = failure {
            if first {
                // Not ready: both sides' counters are read again next time.
                slots.idle.clear();
                slots.in_doubt.clear();
            }
            return Err(error);
        }
        slots.ready = true;
        self.ready_changed.notify_all();
        Ok(())
    }

    /// Makes the cache agree with PostgreSQL for `slot`: the rows changed by
    /// the transactions PostgreSQL logged past the cache's number are
    /// reloaded from PostgreSQL, and the local number moves up to its.
    fn repair_slot(
        &self,
        cache: &dyn SwtHost,
        slot: &mut Slot,
        remote: Option<&Vec<(i64, String)>>,
    ) -> Result<(), CacheError> {
        let Some(log) = remote else { return Ok(()) };
        let ahead: Vec<&(i64, String)> = log.iter().filter(|(txn_id, _)| *txn_id > slot.txn_id).collect();
        let Some(&&(newest, _)) = ahead.last() else { return Ok(()) };
        let changes: Vec<&str> = ahead.iter().map(|(_, changes)| changes.as_str()).collect();
        refresh_changed(cache, &changes.join("\n"))?;
        let db = cache.database();
        let mut txn = db.begin_with_origin(CommitMode::Sync, Origin::Refresh)?;
        record_counter(&mut txn, slot.id, newest)?;
        txn.commit()?;
        slot.txn_id = newest;
        self.status.in_doubt_resolved.fetch_add(ahead.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// An idle slot (a new one when none is), once resolution is done.
    fn take_slot(self: &Arc<Swt>) -> Result<Slot, EngineError> {
        let deadline = Instant::now() + READY_WAIT;
        let mut slots = self.slots.lock();
        while !slots.ready || !slots.in_doubt.is_empty() {
            drop(slots);
            self.resolve_in_background();
            slots = self.slots.lock();
            if slots.ready && slots.in_doubt.is_empty() {
                break;
            }
            if self
                .ready_changed
                .wait_until(&mut slots, deadline.min(Instant::now() + Duration::from_millis(100)))
                .timed_out()
                && Instant::now() >= deadline
            {
                let reason = self.status.last_error.lock().clone().unwrap_or_else(|| "still resolving".into());
                return Err(EngineError::hook(
                    "57P03",
                    format!(
                        "SWT write-through is resolving a transaction whose outcome in PostgreSQL is unknown: {reason}"
                    ),
                    Some(
                        "pgtier reloads the rows it changed from PostgreSQL as soon as PostgreSQL answers; retry then."
                            .into(),
                    ),
                ));
            }
        }
        Ok(slots.idle.pop().unwrap_or_else(|| {
            let id = slots.next_slot;
            slots.next_slot += 1;
            Slot::new(id, 0)
        }))
    }

    /// Waits until SWT commits can go (slots read, in-doubt ones resolved); false after `timeout`.
    pub fn wait_ready(self: &Arc<Swt>, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let slots = self.slots.lock();
                if slots.ready && slots.in_doubt.is_empty() {
                    return true;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.resolve_in_background();
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn put_idle(&self, slot: Slot) {
        self.slots.lock().idle.push(slot);
    }

    fn connect(&self, cache: &dyn SwtHost, slot: &mut Slot) -> Result<(), CacheError> {
        if slot.applier.is_some() {
            return Ok(());
        }
        let client = connect_backend(cache.backend().ok_or(CacheError::NoBackend)?)?;
        let (client, _pid) = session_connection(client, &self.node, NodeObject::SwtSlot(slot.id))?;
        slot.applier = Some(Applier::new(client));
        Ok(())
    }

    /// After a lost reply: whether PostgreSQL committed transaction
    /// `txn_id` of `slot`. None when PostgreSQL cannot say now.
    fn committed_remotely(&self, cache: &dyn SwtHost, slot: i32, txn_id: i64) -> Option<bool> {
        let mut client = connect_backend(cache.backend()?).ok()?;
        settle(&mut client, &self.node, slot, txn_id).ok()
    }

    /// Reloads, in the background, the instances of changes PostgreSQL's
    /// rows disagreed with (after the refusing transaction rolled back).
    fn repair_later(self: &Arc<Swt>, changes: Vec<RowChange>) {
        let swt = Arc::downgrade(self);
        let _ = std::thread::Builder::new().name("pgtier-swt-repair".into()).spawn(move || {
            let text = describe_changes(&changes);
            for attempt in 0..20u64 {
                std::thread::sleep(Duration::from_millis(20 * (attempt + 1)));
                let Some(swt) = swt.upgrade() else { return };
                let Some(cache) = swt.cache.upgrade() else { return };
                match refresh_changed(&*cache, &text) {
                    Ok(()) => {
                        swt.status.repairs.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Err(error) => {
                        *swt.status.last_error.lock() =
                            Some(format!("reloading rows PostgreSQL disagreed with: {error}"))
                    }
                }
            }
        });
    }

    fn commit_in_postgres(
        self: &Arc<Swt>,
        cache: &dyn SwtHost,
        txn: &mut Transaction,
        changes: &[RowChange],
    ) -> Result<u64, EngineError> {
        let SwtChanges { statements, sources, touched } = swt_changes(cache, changes);
        if statements.is_empty() {
            return Ok(NO_TICKET);
        }
        // Marked before PostgreSQL can have it; settled when the outcome is known.
        let mut in_flight = Commit::begin(self, touched);
        let mut slot = self.take_slot()?;
        if let Err(error) = self.connect(cache, &mut slot) {
            self.put_idle(slot);
            return Err(error.to_engine());
        }
        let txn_id = slot.txn_id + 1;
        if let Err(error) = record_counter(txn, slot.id, txn_id) {
            self.put_idle(slot);
            return Err(error.to_engine());
        }
        let mut tail = log_statement(&self.node, slot.id, txn_id, &describe_changes(sources.iter().copied()));
        if let Some(prune) = slot.prune(&self.node, cache.database().wal_durable_end().0) {
            tail.push(';');
            tail.push_str(&prune);
        }
        // PostgreSQL holds it durably; what a crash takes from the cache is resolved from there.
        txn.set_commit_mode(CommitMode::Async);
        let refs: Vec<&RowStatement> = statements.iter().collect();
        let outcome = match self.apply_on_slot(&mut slot, &refs, &tail) {
            Ok(outcome) => outcome,
            Err(error) => {
                self.put_idle(slot);
                return Err(error.to_engine());
            }
        };
        match outcome {
            Ok(Applied::Yes) => {
                crash_window_pause();
                slot.commit = in_flight.hand_over();
                Ok(self.park(slot, txn_id))
            }
            Ok(Applied::Refused(refusal)) if refusal.sqlstate == NODE_NOT_OWNED => {
                self.put_idle(slot);
                Err(CacheError::NodeTakenOver { node: self.node.name.clone() }.to_engine())
            }
            Ok(Applied::Refused(refusal)) if refusal.sqlstate == DEFINITION_CHANGED => {
                self.put_idle(slot);
                let group = refs.first().map(|s| s.entry().def.name.clone()).unwrap_or_default();
                Err(CacheError::DefinitionDrift {
                    group,
                    table: refusal.detail.unwrap_or_default(),
                    reason: refusal.message,
                }
                .to_engine())
            }
            Ok(Applied::Refused(refusal))
                if refusal.sqlstate == "23505" && refusal.message.contains("swt_log_pkey") =>
            {
                // PostgreSQL already holds this slot's next number: a commit
                // the cache missed. Resolved like a crash; the client retries.
                self.slots.lock().in_doubt.push(slot);
                self.resolve_in_background();
                Err(EngineError::hook(
                    "40001",
                    "could not serialize access: an earlier SWT transaction on this connection slot committed in PostgreSQL but not yet in the cache",
                    Some("pgtier reloads its rows from PostgreSQL now; retry the transaction.".into()),
                ))
            }
            Ok(Applied::Refused(refusal)) => {
                self.put_idle(slot);
                self.status.refused.fetch_add(1, Ordering::Relaxed);
                if refusal.sqlstate == "P0002" {
                    // A row differs from PostgreSQL's: reload what this transaction touched.
                    self.repair_later(sources.iter().map(|change| (*change).clone()).collect());
                }
                let mut message = refusal.message;
                if let Some(detail) = refusal.detail {
                    let _ = write!(message, " ({detail})");
                }
                Err(EngineError::hook(&refusal.sqlstate, message, refusal.hint))
            }
            Ok(Applied::Unknown(error)) => {
                slot.applier = None;
                match self.committed_remotely(cache, slot.id, txn_id) {
                    Some(true) => {
                        slot.commit = in_flight.hand_over();
                        Ok(self.park(slot, txn_id))
                    }
                    Some(false) => {
                        self.put_idle(slot);
                        Err(error.to_engine())
                    }
                    None => {
                        self.slots.lock().in_doubt.push(slot);
                        self.resolve_in_background();
                        Err(EngineError::hook(
                            "40003",
                            format!("the connection to PostgreSQL broke while an SWT transaction committed there; whether it did is not known yet: {error}"),
                            Some("pgtier reloads the rows it changed from PostgreSQL as soon as PostgreSQL answers; read them to see the outcome.".into()),
                        ))
                    }
                }
            }
            Err(error) => {
                slot.applier = None;
                self.put_idle(slot);
                Err(error.to_engine())
            }
        }
    }

    /// Applies `refs` and then `tail` in one PostgreSQL transaction on the
    /// slot's connection (connected), after the definition check. A changed
    /// definition digest is looked at again once (a change the group's
    /// fingerprint ignores, such as a new index, passes then). Err: the
    /// check could not be built; Ok: what applying answered.
    fn apply_on_slot(
        &self,
        slot: &mut Slot,
        refs: &[&RowStatement],
        tail: &str,
    ) -> Result<Result<Applied, CacheError>, CacheError> {
        let mut outcome = Err(CacheError::NoBackend);
        for attempt in 0..2 {
            let Some(applier) = slot.applier.as_mut() else { unreachable!("connected above") };
            let check = self.definition_check(applier, refs)?;
            let started = Instant::now();
            outcome = apply_checked(applier, check.as_deref(), refs, tail);
            self.status.latency.record(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
            match &outcome {
                Ok(Applied::Refused(refusal)) if refusal.sqlstate == DEFINITION_CHANGED && attempt == 0 => {
                    for statement in refs {
                        *statement.entry().tokens.lock() = None;
                    }
                }
                _ => break,
            }
        }
        Ok(outcome)
    }

    /// Holds a slot whose transaction PostgreSQL committed until the cache's commit ends.
    fn park(&self, mut slot: Slot, txn_id: i64) -> u64 {
        slot.txn_id = txn_id;
        self.status.commits.fetch_add(1, Ordering::Relaxed);
        let mut slots = self.slots.lock();
        slots.next_ticket += 1;
        let ticket = slots.next_ticket;
        slots.busy.insert(ticket, slot);
        ticket
    }
}

/// An SWT transaction's statements for PostgreSQL, the change each one
/// came from, and the instances it touches (by root key text;
/// [`WHOLE_GROUP`] when a table does not carry the root key).
struct SwtChanges<'c> {
    statements: Vec<RowStatement>,
    sources: Vec<&'c RowChange>,
    touched: Vec<(Arc<GroupEntry>, String)>,
}

/// What of `changes` goes to PostgreSQL: changes to tables of SWT groups.
fn swt_changes<'c>(cache: &dyn SwtHost, changes: &'c [RowChange]) -> SwtChanges<'c> {
    let mut out = SwtChanges {
        statements: Vec::with_capacity(changes.len()),
        sources: Vec::with_capacity(changes.len()),
        touched: Vec::new(),
    };
    for change in changes {
        let Some((entry, index)) = cache.table_of_group(&change.table.name) else { continue };
        if entry.def.kind != GroupKind::Swt {
            continue;
        }
        let key = entry
            .root_key_of_row(index, &change.row().values())
            .map_or_else(|| WHOLE_GROUP.to_owned(), |key| key_text(&key));
        if !out.touched.iter().any(|(e, k)| Arc::ptr_eq(e, &entry) && *k == key) {
            out.touched.push((entry.clone(), key));
        }
        if let Some(statement) = row_statement(&entry, index, change) {
            out.statements.push(statement);
            out.sources.push(change);
        }
    }
    out
}

/// SWT commits under way, numbered in the order they start (`fence`: a load
/// whose PostgreSQL snapshot was taken while a commit was under way treats
/// that commit as not in it).
#[derive(Default)]
struct InFlight {
    next: u64,
    commits: BTreeMap<u64, Vec<(Arc<GroupEntry>, String)>>,
    /// Commits settled since marks were last pruned.
    settled: u64,
}

/// Marks pruned every this many settled commits.
const PRUNE_MARKS_EVERY: u64 = 1024;

impl Swt {
    /// Every commit numbered below it was committed in PostgreSQL (or never will be).
    pub fn floor(&self) -> u64 {
        let in_flight = self.in_flight.lock();
        in_flight.commits.keys().next().copied().unwrap_or(in_flight.next)
    }

    /// Commit `commit`'s outcome is known: its marks stop being pending.
    fn settle(&self, commit: u64) {
        if commit == 0 {
            return;
        }
        let (touched, prune) = {
            let mut in_flight = self.in_flight.lock();
            in_flight.settled += 1;
            let prune = in_flight.settled.is_multiple_of(PRUNE_MARKS_EVERY);
            (in_flight.commits.remove(&commit).unwrap_or_default(), prune)
        };
        for (entry, key) in &touched {
            entry.marks.settle(key, commit);
        }
        if prune && let Some(cache) = self.cache.upgrade() {
            let floor = self.floor();
            for entry in cache.group_entries().iter().filter(|entry| entry.def.kind == GroupKind::Swt) {
                entry.marks.prune(floor);
            }
        }
    }

    /// The definition check for the tables `statements` change; a group
    /// whose tables were not checked yet (or met a changed digest) is
    /// verified first (55000 when its tables changed).
    fn definition_check(
        &self,
        applier: &mut Applier,
        statements: &[&RowStatement],
    ) -> Result<Option<String>, CacheError> {
        let mut tables = Vec::new();
        for statement in statements {
            let entry = statement.entry();
            if token_of(entry, statement.index()).is_none() {
                if let Some(drift) = verify_group(&mut applier.client, entry)? {
                    let error = CacheError::DefinitionDrift {
                        group: entry.def.name.clone(),
                        table: drift.table,
                        reason: drift.reason,
                    };
                    let text = error.to_string();
                    if self.status.drifted.lock().insert(entry.def.name.clone(), text.clone()).is_none() {
                        let group = entry.def.name.as_str();
                        tracing::warn!(group, "SWT commits to cache group \"{group}\" are refused: {text}");
                    }
                    return Err(error);
                }
                self.status.drifted.lock().remove(&entry.def.name);
            }
            if let Some(token) = token_of(entry, statement.index())
                && !tables.contains(&token)
            {
                tables.push(token);
            }
        }
        Ok(check_clause(&tables))
    }
}

/// An SWT commit's marks, from before PostgreSQL can have it until its
/// outcome is known: settled on drop unless handed over to the slot
/// (settled when the cache's own commit ends).
struct Commit<'a> {
    swt: &'a Swt,
    number: u64,
}

impl<'a> Commit<'a> {
    fn begin(swt: &'a Swt, touched: Vec<(Arc<GroupEntry>, String)>) -> Commit<'a> {
        // Numbered and registered at once: `floor` never passes a commit under way.
        let mut in_flight = swt.in_flight.lock();
        let number = in_flight.next;
        in_flight.next += 1;
        for (entry, key) in &touched {
            entry.marks.mark(key, number);
        }
        in_flight.commits.insert(number, touched);
        Commit { swt, number }
    }

    fn hand_over(&mut self) -> u64 {
        std::mem::take(&mut self.number)
    }
}

impl Drop for Commit<'_> {
    fn drop(&mut self) {
        self.swt.settle(self.number);
    }
}

/// Test hook: `PGTIER_SWT_CRASH_WINDOW_US` holds every SWT commit that long
/// between PostgreSQL's commit and the cache's, so the crash test
/// (`tests/swt_crash.rs`) lands its kills in that window; with
/// `PGTIER_SWT_CRASH_WINDOW_ANNOUNCE` set it also prints `SWT-WINDOW` on
/// entering it, so the test can kill exactly there.
fn crash_window_pause() {
    static PAUSE: std::sync::OnceLock<(Option<Duration>, bool)> = std::sync::OnceLock::new();
    let (pause, announce) = PAUSE.get_or_init(|| {
        let pause =
            std::env::var("PGTIER_SWT_CRASH_WINDOW_US").ok().and_then(|v| v.parse().ok()).map(Duration::from_micros);
        (pause, std::env::var_os("PGTIER_SWT_CRASH_WINDOW_ANNOUNCE").is_some())
    });
    if let Some(pause) = pause {
        if *announce {
            println!("SWT-WINDOW");
        }
        std::thread::sleep(*pause);
    }
}

/// The ticket of a transaction that changed no SWT row PostgreSQL needs.
const NO_TICKET: u64 = 0;

/// The participant installed on SWT tables.
pub(crate) struct SwtParticipant(pub Arc<Swt>);

impl CommitParticipant for SwtParticipant {
    fn commit_first(&self, txn: &mut Transaction, changes: &[RowChange]) -> pgtier_engine::Result<u64> {
        let Some(cache) = self.0.cache.upgrade() else { return Err(EngineError::ShuttingDown) };
        self.0.commit_in_postgres(&*cache, txn, changes)
    }

    fn finished(&self, ticket: u64, committed: bool) {
        if ticket == NO_TICKET {
            return;
        }
        let swt = &self.0;
        let wal_end = swt.cache.upgrade().map_or(u64::MAX, |cache| cache.database().wal_end().0);
        let mut slots = swt.slots.lock();
        let Some(mut slot) = slots.busy.remove(&ticket) else { return };
        let commit = std::mem::take(&mut slot.commit);
        if committed {
            slot.unconfirmed.push_back((slot.txn_id, wal_end));
            slots.idle.push(slot);
            drop(slots);
            swt.settle(commit);
            return;
        }
        // PostgreSQL has it, the cache does not: resolved like a crash.
        slot.txn_id -= 1;
        slots.in_doubt.push(slot);
        drop(slots);
        swt.settle(commit);
        swt.resolve_in_background();
    }
}

/// The changed rows, for PostgreSQL's progress row: per line the table name
/// and the row image, in hex (resolution needs only their root keys).
fn describe_changes<'a>(changes: impl IntoIterator<Item = &'a RowChange>) -> String {
    let mut text = String::new();
    for change in changes {
        if !text.is_empty() {
            text.push('\n');
        }
        hex(&mut text, change.table.name.as_bytes());
        text.push(':');
        hex(&mut text, &change.image);
    }
    text
}

fn hex(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// Reloads from PostgreSQL the instances of the rows `described` lists
/// (see [`describe_changes`]); a row whose root key cannot be told reloads its whole group.
fn refresh_changed(cache: &dyn SwtHost, described: &str) -> Result<(), CacheError> {
    let catalog = cache.database().catalog();
    let mut keys: BTreeMap<String, (Vec<Vec<Value>>, bool)> = BTreeMap::new();
    for line in described.lines().filter(|line| !line.is_empty()) {
        let damaged = || CacheError::StreamOrder {
            group: String::new(),
            reason: format!("pgtier.swt_log holds a damaged change record: {line:.80}"),
        };
        let (name, image) = line.split_once(':').ok_or_else(damaged)?;
        let name = String::from_utf8(unhex(name).ok_or_else(damaged)?).map_err(|_| damaged())?;
        let image = unhex(image).ok_or_else(damaged)?;
        let (Some(schema), Some((entry, index))) = (catalog.table_by_name(&name), cache.table_of_group(&name)) else {
            continue;
        };
        let change = RowChange::from_image(RowOp::Insert, Arc::clone(schema), image).map_err(CacheError::Engine)?;
        let slot = keys.entry(entry.def.name.clone()).or_default();
        match entry.root_key_of_row(index, &change.row().values()) {
            Some(key) => slot.0.push(key),
            None => slot.1 = true,
        }
    }
    for (group, (keys, whole)) in keys {
        if whole {
            let cached = cache.cached_root_keys(&group)?;
            cache.refresh(&group, &cached, &LoadOptions::default())?;
        } else {
            let entry = cache.entry(&group)?;
            cache.refresh_instances(&entry, &keys)?;
        }
    }
    Ok(())
}

/// The log row of a commit, after the check that this directory still owns the node name.
fn log_statement(node: &NodeIdentity, slot: i32, txn_id: i64, changes: &str) -> String {
    let (name, incarnation) = (quote_literal(&node.name), quote_literal(&node.incarnation));
    format!(
        "SELECT pgtier.check_node({name}, {incarnation}); INSERT INTO pgtier.swt_log (node, incarnation, slot, txn_id, changes) VALUES ({name}, {incarnation}, {slot}, {txn_id}, {})",
        quote_literal(changes)
    )
}

/// Whether PostgreSQL holds transaction `txn_id` of `slot`, once no session
/// is still committing it: probes by inserting the same log key (rolled
/// back), which PostgreSQL makes wait while another session holds that key
/// uncommitted (up to the lock timeout: then an error, and no answer).
fn settle(client: &mut Client, node: &NodeIdentity, slot: i32, txn_id: i64) -> Result<bool, CacheError> {
    let mut probe = client.transaction().map_err(|e| connection_error(&e))?;
    probe
        .batch_execute(&format!("SET LOCAL lock_timeout = {OUTCOME_LOCK_TIMEOUT_MS}"))
        .map_err(|e| connection_error(&e))?;
    let inserted = probe
        .execute(
            "INSERT INTO pgtier.swt_log (node, incarnation, slot, txn_id, changes) VALUES ($1, $2, $3, $4, '') ON CONFLICT DO NOTHING",
            &[&node.name, &node.incarnation, &slot, &txn_id],
        )
        .map_err(|e| connection_error(&e))?;
    probe.rollback().map_err(|e| connection_error(&e))?;
    Ok(inserted == 0)
}

/// This node's SWT log in PostgreSQL: per slot, (transaction number, changes) in order.
fn read_log(client: &mut Client, node: &NodeIdentity) -> Result<BTreeMap<i32, Vec<(i64, String)>>, CacheError> {
    let rows = client
        .query("SELECT slot, txn_id, changes FROM pgtier.swt_log WHERE node = $1 AND incarnation = $2 ORDER BY slot, txn_id", &[&node.name, &node.incarnation])
        .map_err(|e| connection_error(&e))?;
    let mut log: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    for row in &rows {
        log.entry(row.get::<_, i32>(0)).or_default().push((row.get::<_, i64>(1), row.get::<_, String>(2)));
    }
    Ok(log)
}

fn ensure_slots_table(db: &Database) -> Result<(), CacheError> {
    if db.catalog().table_by_name(SLOTS_TABLE).is_some() {
        return Ok(());
    }
    let mut txn = db.begin()?;
    let def = TableDef::new(
        SLOTS_TABLE,
        vec![ColumnDef::new("slot", DataType::Int4), ColumnDef::new("txn_id", DataType::Int8).not_null()],
        &["slot"],
    );
    match txn.create_table(&def) {
        Ok(_) => Ok(txn.commit().map(|_| ())?),
        // Created meanwhile by another resolver.
        Err(EngineError::DuplicateTable { .. }) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

fn read_local_counters(db: &Database) -> Result<BTreeMap<i32, i64>, CacheError> {
    let mut txn = db.begin_with_origin(db.default_commit_mode(), Origin::Refresh)?;
    let Some(table) = txn.catalog().table_by_name(SLOTS_TABLE).map(|t| t.id) else { return Ok(BTreeMap::new()) };
    let mut counters = BTreeMap::new();
    txn.scan_table(table, |row| {
        if let (Value::Int4(slot), Value::Int8(txn_id)) = (row.get(0).to_owned_value(), row.get(1).to_owned_value()) {
            counters.insert(slot, txn_id);
        }
        Ok(true)
    })?;
    txn.rollback();
    Ok(counters)
}

/// Sets slot `slot`'s local counter in `txn`.
fn record_counter(txn: &mut Transaction, slot: i32, txn_id: i64) -> Result<(), CacheError> {
    let table = txn
        .catalog()
        .table_by_name(SLOTS_TABLE)
        .map(|t| t.id)
        .ok_or_else(|| CacheError::Engine(EngineError::UndefinedTable { name: SLOTS_TABLE.into() }))?;
    if !txn.update(table, &[Value::Int4(slot)], &[(1, Value::Int8(txn_id))])? {
        txn.insert(table, &[Value::Int4(slot), Value::Int8(txn_id)])?;
    }
    Ok(())
}
