//! Transaction blocks, kept as PostgreSQL's backend keeps them (xact.c),
//! not in the protocol layer:
//!
//! - explicit blocks, BEGIN ... COMMIT/ROLLBACK;
//! - implicit blocks the connection opens itself for a run of protocol
//!   messages: the statements of one Query message, or the Executes up to
//!   Sync. The run's end ([`Connection::end_implicit_block`]) commits
//!   them, or rolls them back after an error, so a driver's batch is atomic;
//! - the aborted state: after an error inside a block every statement but
//!   COMMIT and ROLLBACK fails with 25P02 until the block ends;
//! - [`CommitParticipant`]s, other systems whose part of the transaction
//!   commits or rolls back with the local one.
//!
//! Outside a block each statement commits on its own (autocommit).

use std::any::Any;

use pgtier_engine::{CommitInfo, CommitMode, Transaction, Value};
use sqlparser::ast::Statement;

use super::rows::{CommandTag, ResultRows, Tag};
use super::statement::{Stmt, StmtKind, TxnKind, classify};
use super::{Block, Connection};
use crate::clock::now_micros;
use crate::error::{Result, SqlError, SqlNotice};
use crate::plan::TxnCommand;

/// What ReadyForQuery reports (`I`, `T`, `E`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionStatus {
    Idle,
    InBlock,
    /// An error inside BEGIN: only COMMIT/ROLLBACK are accepted.
    Failed,
}

/// Which protocol message runs a statement: what the statement means for
/// the transaction block depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// A statement of a Query message (simple protocol).
    Query,
    /// An Execute message. `sync_next`: the Sync that ends the message run
    /// has already arrived right behind it, so this Execute is alone in its
    /// run and autocommits (the outcome of an implicit block, with less
    /// work); otherwise it opens the run's implicit block.
    Execute { sync_next: bool },
    /// The statement an SQL `EXECUTE` names: it runs in the transaction
    /// state as it is (EXECUTE itself was the message's statement).
    Prepared,
}

/// Another system whose part of the session's transactions commits or rolls
/// back with the local transaction: the server's passthrough (PostgreSQL's
/// transaction on the block's backend connection) today, synchronous
/// write-through later. The server installs it
/// ([`Connection::add_participant`]); it may do network I/O, `sql` never
/// does.
///
/// Called for every local transaction that commits or aborts (autocommitted
/// statements included), so a participant with nothing open must return at
/// once. Participants are called in the order they were added.
///
/// At commit (COMMIT, the end of an implicit block, autocommit):
/// 1. [`before_commit`](Self::before_commit) on each participant. The
///    first error stops there: the local transaction is rolled back,
///    [`abort`](Self::abort) is called on every participant, and the
///    commit fails with that error (the block is over: status `I`).
/// 2. The local commit. If it fails, or the engine rolled the transaction
///    back instead, `abort` is called on every participant; a participant
///    whose `before_commit` succeeded has committed its part and that stays
///    committed: the one window that is not atomic.
/// 3. [`after_commit`](Self::after_commit) on each participant. It cannot
///    fail the transaction, which is committed (and durable as the commit
///    mode says); a participant deals with its own failures there.
///
/// When the transaction ends without committing (ROLLBACK, a failed block
/// ending, an error outside a block, the session rolling back as it ends):
/// `abort` on each participant, before the local rollback. It cannot fail
/// either. An error inside a block rolls the local transaction back at
/// once, but the participants' parts only when the client ends the block:
/// until then the block is the client's, and so is, say, passthrough's
/// backend connection.
pub trait CommitParticipant: Any + Send {
    /// Commits this participant's part, before the local commit. An error
    /// aborts the whole transaction with that error.
    fn before_commit(&mut self) -> Result<()>;

    /// The local commit succeeded.
    fn after_commit(&mut self) {}

    /// The transaction ended without committing (or its local commit
    /// failed): undo what can still be undone.
    fn abort(&mut self);

    /// SAVEPOINT, ROLLBACK TO SAVEPOINT or RELEASE SAVEPOINT (`command`)
    /// in the open block, before pgtier runs it. A participant whose part
    /// could not follow it refuses with an error (the statement fails).
    fn savepoint(&mut self, command: &str) -> Result<()> {
        let _ = command;
        Ok(())
    }
}

impl Connection {
    /// True inside a transaction block (explicit or implicit).
    pub fn in_transaction(&self) -> bool {
        self.block != Block::None
    }

    /// The block state ReadyForQuery reports.
    pub fn transaction_status(&self) -> TransactionStatus {
        match self.block {
            Block::None => TransactionStatus::Idle,
            Block::Active => TransactionStatus::InBlock,
            Block::Failed => TransactionStatus::Failed,
        }
    }

    /// BEGIN.
    pub fn begin(&mut self) -> Result<()> {
        self.txn_command(&TxnCommand::Begin).map(|_| ())
    }

    /// COMMIT (a failed block is rolled back instead, as PostgreSQL does).
    pub fn commit(&mut self) -> Result<()> {
        self.txn_command(&TxnCommand::Commit).map(|_| ())
    }

    pub fn rollback(&mut self) -> Result<()> {
        self.txn_command(&TxnCommand::Rollback).map(|_| ())
    }

    /// An error raised outside the executor for the current statement (a
    /// COPY row the server could not decode, a bad Bind parameter): the
    /// open block fails as if the statement itself had, like PostgreSQL.
    pub fn statement_failed(&mut self) {
        self.fail();
    }

    /// Adds a participant to every later transaction of this session.
    pub fn add_participant(&mut self, participant: Box<dyn CommitParticipant>) {
        self.participants.push(participant);
    }

    /// The participant of type `P`, for its owner to reach its state.
    pub fn participant_mut<P: CommitParticipant>(&mut self) -> Option<&mut P> {
        self.participants.iter_mut().find_map(|p| (p.as_mut() as &mut dyn Any).downcast_mut::<P>())
    }

    /// PostgreSQL's WARNINGs for BEGIN inside a block and COMMIT/ROLLBACK
    /// outside one, raised by [`Connection::execute_stmt`] before the
    /// statement ran, oldest first: a server sends them before the
    /// statement's own notices ([`Connection::take_notices`]).
    pub fn take_warnings(&mut self) -> Vec<SqlNotice> {
        std::mem::take(&mut self.warnings)
    }

    /// A Query message with several statements: they run as one implicit
    /// block unless a block is open or one of them is BEGIN, COMMIT or
    /// ROLLBACK (PostgreSQL's rule, simplified). The end of the message
    /// ends it ([`Connection::end_implicit_block`]).
    pub fn begin_implicit_query(&mut self, stmts: &[Statement]) -> Result<()> {
        if self.block != Block::None || stmts.iter().any(|s| matches!(classify(s).0, TxnKind::Begin | TxnKind::End(_)))
        {
            return Ok(());
        }
        self.begin()?;
        self.implicit = true;
        Ok(())
    }

    /// The end of a message run (Sync, the end of a Query message, or a
    /// Query arriving before Sync): commits the implicit block, or rolls it
    /// back after an error. A failing commit is returned (the server
    /// reports it before ReadyForQuery); the block is over either way.
    pub fn end_implicit_block(&mut self) -> Result<()> {
        self.pending_txn_start = None;
        if !std::mem::take(&mut self.implicit) {
            return Ok(());
        }
        match self.block {
            Block::Active => self.commit(),
            Block::Failed => self.rollback(),
            Block::None => Ok(()),
        }
    }

    /// Runs a planned statement (`StmtKind::Sql`) of the message `via`
    /// (see [`Via`]) and lends its result rows to `rows`, as
    /// [`Connection::execute_with`] does.
    pub fn execute_stmt<R>(
        &mut self,
        stmt: &Stmt,
        params: &[Value],
        via: Via,
        rows: impl FnOnce(ResultRows<'_>) -> R,
    ) -> Result<(CommandTag, R)> {
        let StmtKind::Sql(ps) = stmt.kind() else {
            return Err(SqlError::new("XX000", "not a planned statement"));
        };
        self.before_statement(stmt.txn, via)?;
        self.execute_with(ps, params, rows)
    }

    fn before_statement(&mut self, txn: TxnKind, via: Via) -> Result<()> {
        if via == Via::Prepared {
            return Ok(());
        }
        if txn != TxnKind::None && !self.implicit {
            self.txn_warning(txn);
        }
        let Via::Execute { sync_next } = via else { return Ok(()) };
        match txn {
            // Several Executes before Sync are one transaction, as in
            // PostgreSQL (a driver's batch is atomic). A lone Execute
            // followed by Sync needs no block: autocommit does the same
            // with less work.
            TxnKind::None | TxnKind::RollbackTo => {
                if !self.implicit && self.block == Block::None && !sync_next {
                    self.begin()?;
                    self.implicit = true;
                }
            }
            // BEGIN makes the implicit block explicit; COMMIT and ROLLBACK
            // end it.
            TxnKind::Begin | TxnKind::End(_) => self.implicit = false,
        }
        Ok(())
    }

    fn txn_warning(&mut self, txn: TxnKind) {
        let message = match (txn, self.block) {
            (TxnKind::Begin, Block::Active | Block::Failed) => {
                SqlNotice { sqlstate: "25001", message: "there is already a transaction in progress".into() }
            }
            (TxnKind::End(_), Block::None) => {
                SqlNotice { sqlstate: "25P01", message: "there is no transaction in progress".into() }
            }
            _ => return,
        };
        self.warnings.push(message);
    }

    /// The current statement failed: inside a block the block fails (only
    /// COMMIT/ROLLBACK, and ROLLBACK TO a savepoint, from now on); the
    /// transaction is rolled back, the participants' parts with it only
    /// outside a block. With savepoints its changes stay until ROLLBACK TO
    /// or the end of the block (session/savepoint.rs).
    pub(super) fn fail(&mut self) {
        self.pending_txn_start = None;
        match self.block {
            Block::None => self.rollback_txn(),
            Block::Active | Block::Failed => {
                self.block = Block::Failed;
                match self.txn.as_mut() {
                    Some(t) if t.savepoint_depth() > 0 => t.statement_failed(),
                    _ => self.rollback_local(),
                }
            }
        }
    }

    pub(super) fn ensure_txn(&mut self) -> Result<()> {
        if self.open_txn().is_none() {
            match self.txn.as_mut() {
                Some(t) => t.restart(self.db.default_commit_mode())?,
                None => {
                    let mut t = self.db.begin()?;
                    // Once per session: the Transaction is restarted, not rebuilt.
                    if let Some(flag) = &self.cancel {
                        t.set_cancel_flag(std::sync::Arc::clone(flag));
                    }
                    self.txn = Some(t);
                }
            }
            self.txn_start_micros = self.pending_txn_start.take().unwrap_or_else(now_micros);
        }
        Ok(())
    }

    pub(super) fn txn_command(&mut self, cmd: &TxnCommand) -> Result<(Tag, u64)> {
        match cmd {
            TxnCommand::Begin => {
                if self.block == Block::Failed {
                    return Err(SqlError::transaction_aborted());
                }
                if self.block == Block::None {
                    self.ensure_txn()?;
                    self.block = Block::Active;
                    self.settings.begin_block();
                }
                Ok((Tag::Plain("BEGIN"), 0))
            }
            TxnCommand::Commit => {
                let failed = self.block == Block::Failed;
                self.block = Block::None;
                if failed {
                    self.settings.end_block(false);
                    self.rollback_txn();
                    return Ok((Tag::Plain("ROLLBACK"), 0));
                }
                let committed = self.commit_txn();
                let rolled_back = committed.as_ref().map_or(true, |info| info.as_ref().is_some_and(|i| i.rolled_back));
                self.settings.end_block(!rolled_back);
                committed?;
                Ok((Tag::Plain(if rolled_back { "ROLLBACK" } else { "COMMIT" }), 0))
            }
            TxnCommand::Rollback => {
                self.block = Block::None;
                self.settings.end_block(false);
                self.rollback_txn();
                Ok((Tag::Plain("ROLLBACK"), 0))
            }
            TxnCommand::Savepoint(_) | TxnCommand::RollbackTo(_) | TxnCommand::Release(_) => {
                self.savepoint_command(cmd)
            }
        }
    }

    /// The transaction statements run in, while one is open. The session
    /// keeps its `Transaction` after commit or rollback and restarts it for
    /// the next one (see `ensure_txn`).
    pub(super) fn open_txn(&self) -> Option<&Transaction> {
        self.txn.as_ref().filter(|t| t.is_open())
    }

    /// Commits the open transaction, if any, with its participants (see
    /// [`CommitParticipant`]), in the mode the session's
    /// `synchronous_commit` asks for at commit time, as PostgreSQL decides:
    /// `off` acknowledges before the WAL is durable; any other value waits
    /// for it. Read-only transactions log nothing and skip the lookup.
    pub(super) fn commit_txn(&mut self) -> Result<Option<CommitInfo>> {
        if self.open_txn().is_none() {
            self.cursors.end_txn(true);
            return Ok(None);
        }
        if !self.temp.on_commit.is_empty()
            && let Err(e) = self.on_commit()
        {
            self.rollback_txn();
            return Err(e);
        }
        if let Err(e) = self.participants.iter_mut().try_for_each(|p| p.before_commit()) {
            self.rollback_txn();
            return Err(e);
        }
        let Some(t) = self.txn.as_mut() else { return Ok(None) };
        if !t.is_read_only() {
            let asynchronous = self.settings.get("synchronous_commit").is_some_and(|v| v == "off");
            t.set_commit_mode(if asynchronous { CommitMode::Async } else { CommitMode::Sync });
        }
        let committed = t.commit_in_place();
        if committed.is_ok() {
            self.temp.committed = self.temp.on_commit.len();
        }
        self.cursors.end_txn(matches!(&committed, Ok(info) if !info.rolled_back));
        for p in &mut self.participants {
            match &committed {
                Ok(info) if !info.rolled_back => p.after_commit(),
                _ => p.abort(),
            }
        }
        Ok(Some(committed?))
    }

    /// Rolls back the open transaction, if any; participants first.
    fn rollback_txn(&mut self) {
        for p in &mut self.participants {
            p.abort();
        }
        self.rollback_local();
    }

    fn rollback_local(&mut self) {
        self.cursors.end_txn(false);
        if let Some(t) = self.txn.as_mut() {
            t.rollback_in_place();
        }
        self.temp.on_commit.truncate(self.temp.committed);
    }
}
