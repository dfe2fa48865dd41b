//! One client session: the messages of the simple and extended query
//! protocols, over one `pgtier_sql::Connection`, served on the session's
//! own thread or by an event loop (event_loop.rs), which may move it
//! between threads.
//!
//! By protocol phase: startup and authentication (session/startup.rs), the
//! simple query (session/simple.rs), the extended query and its portals
//! (session/extended.rs), rows and RowDescription on the wire
//! (session/encode.rs); COPY in copy.rs, passthrough in passthrough.rs.
//! This module reads the messages and dispatches them.
//!
//! Session state owned here is protocol state only: the unnamed statement,
//! portals, the error state of the extended protocol (skip to Sync), the
//! settings last reported with ParameterStatus, the socket. Transaction
//! blocks (explicit, and the implicit ones of a Query's statements and of
//! the Executes up to Sync), named statements, the statement cache and
//! SQL-level PREPARE are the Connection's.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pgtier_engine::Value;
use pgtier_sql::session::{Stmt, TransactionStatus, Utility, Via};
use pgtier_sql::{Connection, SqlError};
use pgwire::messages::PgWireFrontendMessage as F;
use sqlparser::ast::Statement;

use crate::server::Shared;
use crate::wire::{BindRef, ReadError, Stream, WRITE_FLUSH_BYTES, Wire, parse_execute};

mod backup;
mod encode;
mod extended;
mod simple;
mod startup;

use encode::{encode_rows, row_description};
use extended::Portal;
use startup::fatal;
pub use startup::serve;

/// Settings PostgreSQL reports with ParameterStatus (GUC_REPORT), with the
/// capitalisation it reports them in.
const REPORTED: [(&str, &str); 9] = [
    ("application_name", "application_name"),
    ("client_encoding", "client_encoding"),
    ("DateStyle", "datestyle"),
    ("IntervalStyle", "intervalstyle"),
    ("TimeZone", "timezone"),
    ("standard_conforming_strings", "standard_conforming_strings"),
    ("server_version", "server_version"),
    ("integer_datetimes", "integer_datetimes"),
    ("is_superuser", "is_superuser"),
];

/// Served by one thread at a time, but an event loop may move it between
/// threads (see event_loop.rs), hence Send.
pub struct Session {
    pub(crate) wire: Wire,
    pub(crate) conn: Connection,
    /// Parse without a name; named statements are the Connection's.
    unnamed_stmt: Option<Arc<Stmt>>,
    portals: HashMap<String, Portal>,
    unnamed_portal: Portal,
    pub(crate) cancel: Arc<AtomicBool>,
    /// Extended protocol after an error: ignore everything up to Sync.
    skip_until_sync: bool,
    /// The connection cannot continue (lost or confused during COPY).
    pub(crate) closing: bool,
    /// Position (in the Parse text) of the error being reported.
    error_position: Option<u32>,
    reported: Vec<String>,
    scratch: String,
    /// The body of the Bind or Execute being handled, copied out of the
    /// read buffer (reused: no allocation per message).
    frame: Vec<u8>,
    pub(crate) remote: Option<Arc<crate::passthrough::Pool>>,
    /// The server: `pg_reload_conf()` reloads its configuration.
    shared: Arc<Shared>,
    /// The last message answered was a Sync or Query (ReadyForQuery went
    /// out): the client's turn, so idle_in_transaction_session_timeout
    /// runs if a block is open (as PostgreSQL, not between Execute and Sync).
    after_ready: bool,
    /// When a parked session idle in a transaction block is ended (event
    /// loops: event_loop.rs reads it); None: not parked so, or no timeout.
    pub(crate) idle_deadline: Option<std::time::Instant>,
    /// The session's log span (pid, address, user, database), entered
    /// whichever thread serves it.
    pub(crate) span: tracing::Span,
    log: crate::logging::LogSettings,
    stats: crate::logging::SessionStats,
}

/// PostgreSQL's FATAL for idle_in_transaction_session_timeout.
const IDLE_IN_TRANSACTION_MSG: &str = "terminating connection due to idle-in-transaction timeout";

impl Session {
    fn new(shared: &Arc<Shared>, wire: Wire, cancel: Arc<AtomicBool>) -> Session {
        let mut conn = Connection::new(shared.db.clone());
        conn.set_cancel_flag(Arc::clone(&cancel));
        let defaults = Arc::clone(&shared.setting_defaults.read());
        for (name, value) in defaults.iter() {
            // Checked at server start: cannot fail here.
            let _ = conn.set_setting_default(name, value);
        }
        if let Some(pool) = &shared.passthrough {
            crate::passthrough::install(&mut conn, pool);
        }
        if let Some(cache) = shared.cache.get() {
            conn.attach_cache(Arc::clone(cache));
        }
        Session {
            wire,
            conn,
            unnamed_stmt: None,
            portals: HashMap::new(),
            unnamed_portal: Portal::default(),
            cancel,
            skip_until_sync: false,
            closing: false,
            error_position: None,
            reported: Vec::new(),
            scratch: String::new(),
            frame: Vec::new(),
            remote: shared.passthrough.clone(),
            shared: Arc::clone(shared),
            after_ready: false,
            idle_deadline: None,
            span: tracing::Span::none(),
            log: shared.log.read().clone(),
            stats: crate::logging::SessionStats::new(),
        }
    }

    /// After SET: ParameterStatus for each reported setting that changed.
    fn report_changes(&mut self) {
        for (i, (name, key)) in REPORTED.iter().enumerate() {
            let now = self.conn.setting(key).unwrap_or("");
            if self.reported.get(i).map(String::as_str) != Some(now) {
                let now = now.to_owned();
                self.wire.parameter_status(name, &now);
                if let Some(slot) = self.reported.get_mut(i) {
                    *slot = now;
                }
            }
        }
    }

    fn status_byte(&self) -> u8 {
        match self.conn.transaction_status() {
            TransactionStatus::Idle => b'I',
            TransactionStatus::InBlock => b'T',
            TransactionStatus::Failed => b'E',
        }
    }

    /// The socket an event loop can wait on (plain TCP only).
    pub(crate) fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        match &self.wire.stream {
            Stream::Plain(t) => Some(std::os::fd::AsRawFd::as_raw_fd(t)),
            _ => None,
        }
    }

    /// The end of a session: answers to messages pipelined before
    /// Terminate or EOF still go out; an open transaction rolls back.
    pub(crate) fn finish(&mut self) {
        let span = self.span.clone();
        let _entered = span.enter();
        let _ = self.wire.flush();
        if self.conn.in_transaction() {
            let _ = self.conn.rollback();
        }
        if self.log.disconnections {
            crate::logging::disconnected(&self.stats);
        }
    }

    /// A Query or Execute starts: counted, and timed when
    /// `log_min_duration_statement` is on.
    fn statement_started(&mut self) -> Option<std::time::Instant> {
        self.stats.statements += 1;
        self.log.min_duration_statement.map(|_| std::time::Instant::now())
    }

    /// Logs the statement if it ran at least `log_min_duration_statement`.
    fn statement_ended(&self, started: Option<std::time::Instant>, text: &str, params: &[Value]) {
        let (Some(started), Some(min)) = (started, self.log.min_duration_statement) else { return };
        if started.elapsed() >= min {
            let params = self.log.statement_parameters.then_some(params);
            crate::logging::slow_statement(started, text, params);
        }
    }

    /// For an event loop: serves every message the socket has, flushes the
    /// answers, and returns true once it would have to wait for the client
    /// (false: the session has ended).
    pub(crate) fn serve_ready(&mut self) -> bool {
        self.run_until(true)
    }

    fn run(&mut self) {
        self.run_until(false);
    }

    /// How long the client may now stay silent before the session ends
    /// with 25P03: idle_in_transaction_session_timeout, once ReadyForQuery
    /// said `T` or `E`. None: no limit.
    fn idle_timeout(&self) -> Option<std::time::Duration> {
        if !self.after_ready || self.conn.transaction_status() == TransactionStatus::Idle {
            return None;
        }
        self.conn.idle_in_transaction_timeout()
    }

    /// The session idled in a transaction block past its timeout: FATAL
    /// 25P03 and the end (the caller's `finish` rolls the block back and
    /// so releases its locks).
    pub(crate) fn end_idle_in_transaction(&mut self) {
        let _entered = self.span.enter();
        fatal(&mut self.wire, "25P03", IDLE_IN_TRANSACTION_MSG);
    }

    /// Serves messages until the session ends (false) or, with `park`,
    /// until the next message has not arrived (true).
    fn run_until(&mut self, park: bool) -> bool {
        let span = self.span.clone();
        let _entered = span.enter();
        self.idle_deadline = None;
        // Bind parameters, COPY data and DataRow text are read and written
        // in the session's TimeZone and DateStyle, outside any statement.
        self.conn.enter();
        loop {
            if self.closing {
                let _ = self.wire.flush();
                return false;
            }
            if self.wire.wbuf.len() >= WRITE_FLUSH_BYTES && self.wire.flush().is_err() {
                return false;
            }
            if !park && let Some(timeout) = self.idle_timeout() {
                match self.wire.wait_for_client(timeout) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.end_idle_in_transaction();
                        return false;
                    }
                    Err(_) => return false,
                }
            }
            // Only here, between messages, may a session stop for want of
            // input: reads inside a message or a COPY still wait.
            let tag = match self.wire.read_frame_between(park) {
                Ok(t) => t,
                Err(ReadError::WouldBlock) => {
                    self.idle_deadline = self.idle_timeout().map(|t| std::time::Instant::now() + t);
                    return true;
                }
                Err(ReadError::Closed) => return false,
                Err(ReadError::Protocol(m)) => {
                    fatal(&mut self.wire, "08P01", &m);
                    return false;
                }
            };
            // Bind, Execute and Sync, the messages of every prepared-statement
            // round trip, are read in place; the rest through pgwire.
            self.after_ready = false;
            match tag {
                b'S' => {
                    self.wire.consume_frame();
                    self.skip_until_sync = false;
                    self.end_implicit_block();
                    let status = self.status_byte();
                    self.wire.ready_for_query(status);
                    self.after_ready = true;
                    continue;
                }
                b'B' | b'E' => {
                    if let Err(m) = self.bind_or_execute(tag) {
                        fatal(&mut self.wire, "08P01", &m);
                        return false;
                    }
                    continue;
                }
                _ => {}
            }
            let msg = match self.wire.decode_frame() {
                Ok(m) => m,
                Err(ReadError::Closed | ReadError::WouldBlock) => return false,
                Err(ReadError::Protocol(m)) => {
                    fatal(&mut self.wire, "08P01", &m);
                    return false;
                }
            };
            match msg {
                F::Query(q) => {
                    self.skip_until_sync = false;
                    self.end_implicit_block();
                    self.cancel.store(false, Ordering::Relaxed);
                    let started = self.statement_started();
                    self.simple_query(&q.query);
                    self.statement_ended(started, &q.query, &[]);
                    let status = self.status_byte();
                    self.wire.ready_for_query(status);
                    self.after_ready = true;
                }
                F::Flush(_) => {
                    if self.wire.flush().is_err() {
                        return false;
                    }
                }
                F::Terminate(_) => return false,
                // Left over from a COPY that failed: ignored, as PostgreSQL does.
                F::CopyData(_) | F::CopyDone(_) | F::CopyFail(_) => {}
                msg if self.skip_until_sync => drop(msg),
                F::Parse(m) => self.extended(|s| s.parse(m)),
                F::Describe(m) => self.extended(|s| s.describe(&m)),
                F::Close(m) => self.extended(|s| s.close(&m)),
                _ => {
                    fatal(&mut self.wire, "08P01", "unexpected message type");
                    return false;
                }
            }
        }
    }

    /// The Bind or Execute `read_frame` buffered. Err: the message is
    /// malformed (the session ends with 08P01).
    fn bind_or_execute(&mut self, tag: u8) -> Result<(), String> {
        if self.skip_until_sync {
            self.wire.consume_frame();
            return Ok(());
        }
        // A copy of the body, so the session can be borrowed mutably
        // while the message's fields borrow it.
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        frame.extend_from_slice(self.wire.frame_body());
        self.wire.consume_frame();
        let result = if tag == b'B' {
            BindRef::parse(&frame).map(|m| self.extended(|s| s.bind(&m)))
        } else {
            parse_execute(&frame).map(|(name, max_rows)| {
                self.cancel.store(false, Ordering::Relaxed);
                self.extended(|s| s.execute(name.as_deref(), max_rows));
            })
        };
        self.frame = frame;
        result
    }

    /// An extended-protocol step; an error skips the rest up to Sync.
    fn extended(&mut self, step: impl FnOnce(&mut Self) -> Result<(), SqlError>) {
        if let Err(e) = step(self) {
            self.conn.statement_failed();
            let position = self.error_position.take();
            self.wire.error_at(&e, "ERROR", position);
            self.skip_until_sync = true;
        }
    }

    /// Sync (or a Query before Sync) ends the message run: its implicit
    /// block commits, or rolls back after an error. A failing COMMIT is
    /// reported before ReadyForQuery.
    fn end_implicit_block(&mut self) {
        if let Err(e) = self.conn.end_implicit_block() {
            self.wire.error(&e, "ERROR");
        }
    }

    /// WARNINGs of transaction statements, then the NOTICEs the statement
    /// raised (IF [NOT] EXISTS skips, ...).
    fn forward_notices(&mut self) {
        for w in self.conn.take_warnings() {
            self.wire.notice(&SqlError::new(w.sqlstate, w.message), "WARNING");
        }
        for n in self.conn.take_notices() {
            self.wire.notice(&SqlError::new(n.sqlstate, n.message), "NOTICE");
        }
    }

    /// On a standby: DYNAMIC cache groups refuse what they would load
    /// (`Replication::guard_standby_reads`). One branch elsewhere.
    pub(super) fn guard_standby_reads(&self) -> Result<(), SqlError> {
        match &self.shared.replication {
            Some(replication) => replication
                .guard_standby_reads()
                .map_err(|e| SqlError::new("XX000", format!("standby miss hooks: {e}"))),
            None => Ok(()),
        }
    }

    /// Runs a planned statement and streams its rows: in `formats` (an
    /// Execute's portal), or without them as a simple query sends rows
    /// (RowDescription first, then text).
    fn run_statement(&mut self, s: &Stmt, params: &[Value], via: Via, formats: Option<&[i16]>) -> Result<(), SqlError> {
        self.guard_standby_reads()?;
        let wire = &mut self.wire;
        let scratch = &mut self.scratch;
        let returns_rows = s.returns_rows();
        let result = self.conn.execute_stmt(s, params, via, |rows| {
            if !returns_rows {
                return;
            }
            let info = s.result_columns();
            if formats.is_none() {
                let text = vec![0i16; info.columns().len()];
                wire.send(row_description(info.columns(), &text));
            }
            encode_rows(&mut wire.wbuf, rows, formats.unwrap_or(&[]), info.types(), scratch, None);
        });
        self.forward_notices();
        let (tag, ()) = match (result, &self.remote) {
            (Err(e), Some(_)) => return Err(crate::passthrough::refuse_ddl(e)),
            (result, _) => result?,
        };
        self.wire.command_complete(tag);
        Ok(())
    }

    /// A cache-group statement. A LOAD may run for minutes: an event loop
    /// hands its other sessions to a spare thread first.
    fn cache_statement(&mut self, statement: &pgtier_cache::CacheStatement) -> Result<(), SqlError> {
        crate::event_loop::before_wait();
        let started = std::time::Instant::now();
        let result = self.conn.execute_cache(statement);
        crate::logging::cache_statement(statement, started, result.as_ref().map(|r| r.tag.as_str()));
        self.forward_notices();
        self.wire.command_complete(result?.tag);
        Ok(())
    }

    /// PREPARE, EXECUTE, DEALLOCATE (the Connection runs them). The rows of
    /// an EXECUTE go out as a simple query sends them, whichever protocol.
    fn utility(&mut self, ast: &Statement) -> Result<(), SqlError> {
        match self.conn.utility(ast)? {
            Utility::Done(tag) => {
                self.wire.command_complete(tag);
                Ok(())
            }
            Utility::Execute { stmt, params } => self.run_statement(&stmt, &params, Via::Prepared, None),
            Utility::Rows { rows, tag } => {
                let text = vec![0i16; rows.columns().len()];
                self.wire.send(row_description(rows.columns(), &text));
                let types: Vec<_> = rows.columns().iter().map(|c| c.ty).collect();
                encode_rows(&mut self.wire.wbuf, rows.result_rows(), &[], &types, &mut self.scratch, None);
                self.wire.command_complete(tag);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod send_check {
    #[test]
    fn a_session_can_move_between_threads() {
        fn is_send<T: Send>() {}
        is_send::<super::Session>();
    }
}
