//! One client connection, on its own thread: startup (SSL negotiation,
//! cancel requests, authentication), then the simple and extended query
//! protocols over one `pgtier_sql::Connection`.
//!
//! Why a thread per session and blocking I/O: every engine call may block
//! (a sync commit waits for the WAL fsync, a writer waits for a row lock),
//! and the request/response protocol gives a session nothing to do while it
//! waits. A thread per session is PostgreSQL's own model; it costs one
//! `read` and one `write` per round trip and no hand-off between threads,
//! so the server adds only the message decoding to each request.
//!
//! Session state owned here: prepared statements and portals by name (plus
//! the unnamed ones), a bounded cache of statements by SQL text (simple
//! queries and unnamed Parse re-use their plans), the error state of the
//! extended protocol (skip to Sync), and the settings last reported with
//! ParameterStatus. Transaction state is the Connection's.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::PgWireFrontendMessage as F;
use pgwire::messages::data::{FieldDescription, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{Close, Describe, Parse};
use pgwire::messages::startup::{Authentication, BackendKeyData, NegotiateProtocolVersion, SecretKey, Startup};
use pgtier_engine::{DataType, Value};
use pgtier_sql::session::{ResultRows, TransactionStatus};
use pgtier_sql::{Column, Connection, PreparedStatement, SqlError};
use sqlparser::ast::Statement;

use crate::auth::{Exchange, MECHANISM, ScramError};
use crate::config::AuthMethod;
use crate::server::Shared;
use crate::types;
use crate::wire::{BindRef, Codes, ReadError, Stream, WRITE_FLUSH_BYTES, Wire, parse_execute};

/// PostgreSQL's authentication_timeout default.
const AUTH_TIMEOUT: Duration = Duration::from_secs(60);
/// Statements kept by SQL text per session; the cache is dropped whole
/// when full (simple, and a workload has few distinct texts).
const TEXT_CACHE_MAX: usize = 256;
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

/// Runs one connection's handshake, then the session: to its end on this
/// thread, or handed to an event loop (plain TCP, when the server has
/// loops), which then owns `registered` and the connection slot. Never
/// panics on client input; every exit path closes the socket and rolls
/// back an open transaction.
pub fn serve(shared: &Arc<Shared>, tcp: std::net::TcpStream, pid: i32, secret: i32, cancel: Arc<AtomicBool>, registered: crate::server::Registered) {
    let _ = tcp.set_nodelay(true);
    let _ = tcp.set_read_timeout(Some(AUTH_TIMEOUT));
    let mut wire = Wire::new(Stream::Plain(tcp), shared.max_message_bytes);
    let startup = match startup(shared, &mut wire) {
        Ok(Some(s)) => s,
        Ok(None) => return,
        Err(ReadError::Closed | ReadError::WouldBlock) => return,
        Err(ReadError::Protocol(m)) => return fatal(&mut wire, "08P01", &m),
    };
    let user = startup.parameters.get("user").cloned().unwrap_or_default();
    if user.is_empty() {
        return fatal(&mut wire, "28000", "no PostgreSQL user name specified in startup packet");
    }
    let Some(_slot) = shared.reserve_connection() else {
        return fatal(&mut wire, "53300", "sorry, too many clients already");
    };
    match authenticate(shared, &mut wire, &user) {
        Ok(true) => {}
        Ok(false) => return fatal(&mut wire, "28P01", &format!("password authentication failed for user \"{user}\"")),
        Err(ReadError::Closed | ReadError::WouldBlock) => return,
        Err(ReadError::Protocol(m)) => return fatal(&mut wire, "08P01", &m),
    }
    if let Stream::Plain(t) = &wire.stream {
        let _ = t.set_read_timeout(None);
    }
    if let Stream::Tls(t) = &wire.stream {
        let _ = t.sock.set_read_timeout(None);
    }
    let mut session = Session::new(shared, wire, cancel);
    let database = startup.parameters.get("database").filter(|d| !d.is_empty()).unwrap_or(&user).clone();
    session.conn.set_identity(&user, &database);
    session.apply_startup_parameters(&startup, &user);
    session.wire.send(PgWireBackendMessage::BackendKeyData(BackendKeyData::new(pid, SecretKey::I32(secret))));
    session.wire.ready_for_query(b'I');
    if let Some(loops) = shared.loops.get()
        && session.raw_fd().is_some()
    {
        loops.adopt(crate::event_loop::Adopted { session, _guards: Box::new((registered, _slot)) });
        return;
    }
    session.run();
    session.finish();
}

/// Sends a FATAL error and closes.
fn fatal(wire: &mut Wire, sqlstate: &'static str, message: &str) {
    wire.error(&SqlError::new(sqlstate, message), "FATAL");
    let _ = wire.flush();
}

/// SSL/GSS negotiation and the startup packet. None: the connection was a
/// cancel request (handled) and closes without a reply.
fn startup(shared: &Shared, wire: &mut Wire) -> Result<Option<Startup>, ReadError> {
    use pgwire::messages::SslNegotiationMetaMessage as Neg;
    loop {
        match wire.read_startup()? {
            F::SslNegotiation(Neg::PostgresSsl(_)) => match (&shared.tls, &wire.stream) {
                (Some(tls), Stream::Plain(_)) => {
                    // Bytes pipelined after SSLRequest would bypass TLS
                    // (CVE-2021-23214): refuse them.
                    if !wire.rbuf.is_empty() {
                        return Err(ReadError::Protocol("received unencrypted data after SSL request".to_owned()));
                    }
                    wire.wbuf.extend_from_slice(b"S");
                    wire.flush()?;
                    let conn = rustls::ServerConnection::new(tls.clone())
                        .map_err(|e| ReadError::Protocol(format!("TLS: {e}")))?;
                    let Stream::Plain(tcp) = std::mem::replace(&mut wire.stream, Stream::Closed) else {
                        return Err(ReadError::Closed);
                    };
                    wire.stream = Stream::Tls(Box::new(rustls::StreamOwned::new(conn, tcp)));
                    wire.ctx.awaiting_frontend_ssl = true;
                }
                _ => {
                    wire.wbuf.extend_from_slice(b"N");
                    wire.flush()?;
                }
            },
            F::SslNegotiation(Neg::PostgresGss(_)) => {
                wire.wbuf.extend_from_slice(b"N");
                wire.flush()?;
            }
            F::SslNegotiation(Neg::None) => {}
            F::CancelRequest(c) => {
                shared.cancel(c.pid, &c.secret_key);
                return Ok(None);
            }
            F::Startup(s) => {
                wire.ctx.awaiting_frontend_ssl = false;
                wire.ctx.awaiting_frontend_startup = false;
                // We speak 3.0: tell a client asking for a newer minor
                // version (or protocol options) what it gets.
                let options: Vec<String> = s.parameters.keys().filter(|k| k.starts_with("_pq_.")).cloned().collect();
                if s.protocol_number_minor > 0 || !options.is_empty() {
                    wire.send(PgWireBackendMessage::NegotiateProtocolVersion(NegotiateProtocolVersion::new(0, options)));
                }
                return Ok(Some(s));
            }
            _ => return Err(ReadError::Protocol("unexpected message during startup".to_owned())),
        }
    }
}

/// Ok(false): wrong password or unknown user (28P01).
fn authenticate(shared: &Shared, wire: &mut Wire, user: &str) -> Result<bool, ReadError> {
    if shared.auth_method == AuthMethod::Trust {
        wire.send(PgWireBackendMessage::Authentication(Authentication::Ok));
        return Ok(true);
    }
    wire.send(PgWireBackendMessage::Authentication(Authentication::SASL(vec![MECHANISM.to_owned()])));
    let malformed = |m: &str| ReadError::Protocol(format!("malformed SCRAM message: {m}"));
    let F::PasswordMessageFamily(first) = wire.read_message()? else {
        return Err(ReadError::Protocol("expected SASL response".to_owned()));
    };
    let first = first.into_sasl_initial_response().map_err(|_| malformed("bad SASLInitialResponse"))?;
    if first.auth_method != MECHANISM {
        return Err(ReadError::Protocol("client selected an invalid SASL authentication mechanism".to_owned()));
    }
    let data = first.data.unwrap_or_default();
    let (exchange, server_first) = match Exchange::start(&shared.users, user, &data) {
        Ok(x) => x,
        Err(ScramError::Malformed(m)) => return Err(malformed(m)),
        Err(ScramError::Failed) => return Ok(false),
    };
    wire.send(PgWireBackendMessage::Authentication(Authentication::SASLContinue(Bytes::from(server_first))));
    let F::PasswordMessageFamily(last) = wire.read_message()? else {
        return Err(ReadError::Protocol("expected SASL response".to_owned()));
    };
    let last = last.into_sasl_response().map_err(|_| malformed("bad SASLResponse"))?;
    match exchange.finish(&last.data) {
        Ok(server_final) => {
            wire.send(PgWireBackendMessage::Authentication(Authentication::SASLFinal(Bytes::from(server_final))));
            wire.send(PgWireBackendMessage::Authentication(Authentication::Ok));
            Ok(true)
        }
        Err(ScramError::Malformed(m)) => Err(malformed(m)),
        Err(ScramError::Failed) => Ok(false),
    }
}

/// What a statement is, as far as the protocol cares.
pub enum Kind {
    Sql(Box<PreparedStatement>),
    Copy(Box<Statement>),
    /// SQL-level PREPARE / EXECUTE / DEALLOCATE: they share the protocol's
    /// statement names, so the session runs them.
    Utility(Box<Statement>),
    /// Runs on the backend PostgreSQL (passthrough.rs).
    Remote(Box<crate::passthrough::Remote>),
    Empty,
}

/// A backend connection a passthrough statement runs on.
enum Backend {
    /// Leased for this statement alone.
    Statement(crate::passthrough::Lease),
    /// The open block's, kept until the block ends.
    Block(crate::passthrough::BlockLease),
}

impl Backend {
    fn lease(&mut self) -> &mut crate::passthrough::Lease {
        match self {
            Backend::Statement(lease) => lease,
            Backend::Block(block) => block.lease(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TxnKind {
    None,
    Begin,
    /// COMMIT (true) / ROLLBACK (false): the only statements a failed block
    /// accepts.
    End(bool),
}

/// Result columns as last described, and the plan they were read from.
struct ColumnInfo {
    plan_id: usize,
    columns: Vec<Column>,
    types: Vec<Option<DataType>>,
}

/// A parsed statement (named, unnamed, or cached by text).
pub struct Stmt {
    pub kind: Kind,
    /// Parameter OIDs the client declared in Parse (0: infer).
    declared: Vec<u32>,
    param_types: Vec<DataType>,
    returns_rows: bool,
    txn: TxnKind,
    is_set: bool,
    /// Behind a lock only so a session can move between event-loop threads;
    /// one thread at a time uses it.
    columns: parking_lot::Mutex<ColumnInfo>,
}

impl Stmt {
    fn new(kind: Kind, declared: Vec<u32>, txn: TxnKind, is_set: bool) -> Stmt {
        let (param_types, returns_rows, info) = match &kind {
            Kind::Sql(ps) => {
                let columns = ps.result_columns();
                let types = columns.iter().map(|c| c.ty).collect();
                (ps.param_types(), ps.returns_rows(), ColumnInfo { plan_id: ps.plan_id(), columns, types })
            }
            _ => (Vec::new(), false, ColumnInfo { plan_id: 0, columns: Vec::new(), types: Vec::new() }),
        };
        Stmt { kind, declared, param_types, returns_rows, txn, is_set, columns: parking_lot::Mutex::new(info) }
    }

    /// Re-reads the columns when the statement was re-planned (DDL).
    fn refresh_columns(&self) {
        if let Kind::Sql(ps) = &self.kind {
            let id = ps.plan_id();
            let mut info = self.columns.lock();
            if info.plan_id != id {
                info.columns = ps.result_columns();
                info.types = info.columns.iter().map(|c| c.ty).collect();
                info.plan_id = id;
            }
        }
    }

    /// The OID ParameterDescription reports for `$i+1`.
    fn param_oid(&self, i: usize) -> u32 {
        match self.declared.get(i) {
            Some(&oid) if oid != 0 => oid,
            _ => self.param_types.get(i).map_or(types::TEXT, |t| types::oid(*t)),
        }
    }
}

/// Rows of a portal run with a row limit, encoded, waiting for the next
/// Execute.
struct Pending {
    rows: BytesMut,
    ends: Vec<usize>,
    sent: usize,
    tag: String,
}

#[derive(Default)]
struct Portal {
    stmt: Option<Arc<Stmt>>,
    params: Vec<Value>,
    /// Result format per column (0 text, 1 binary).
    formats: Vec<i16>,
    pending: Option<Pending>,
    /// A passthrough portal's parameters, as the client sent them.
    raw: crate::passthrough::RawParams,
}

/// Served by one thread at a time, but an event loop may move it between
/// threads (see event_loop.rs), hence Send.
pub struct Session {
    pub(crate) wire: Wire,
    pub(crate) conn: Connection,
    statements: HashMap<String, Arc<Stmt>>,
    unnamed_stmt: Option<Arc<Stmt>>,
    portals: HashMap<String, Portal>,
    unnamed_portal: Portal,
    by_text: HashMap<String, Arc<Stmt>>,
    pub(crate) cancel: Arc<AtomicBool>,
    /// Extended protocol after an error: ignore everything up to Sync.
    skip_until_sync: bool,
    /// The connection cannot continue (lost or confused during COPY).
    pub(crate) closing: bool,
    /// Position (in the Parse text) of the error being reported.
    error_position: Option<u32>,
    /// Executes since the last Sync run in one transaction the server
    /// began (PostgreSQL's implicit transaction block): committed at Sync,
    /// rolled back there after an error.
    implicit: bool,
    reported: Vec<String>,
    scratch: String,
    /// The body of the Bind or Execute being handled, copied out of the
    /// read buffer (reused: no allocation per message).
    frame: Vec<u8>,
    remote: Option<Arc<crate::passthrough::Pool>>,
    /// The backend connection of the open block's passthrough statements
    /// (see passthrough.rs): ended just before pgtier's part of the block.
    backend_block: Option<crate::passthrough::BlockLease>,
}

/// The formats of `n` columns from a Bind's list (none: all text; one:
/// all alike; else one per column).
fn expand_formats(codes: Codes<'_>, n: usize, out: &mut Vec<i16>) -> Result<(), SqlError> {
    out.clear();
    match codes.len() {
        0 => out.resize(n, 0),
        1 => out.resize(n, codes.get(0).unwrap_or(0)),
        k if k == n => out.extend(codes.iter()),
        k => return Err(SqlError::new("08P01", format!("bind message has {k} result formats but query has {n} columns"))),
    }
    if out.iter().any(|&f| f != 0 && f != 1) {
        return Err(SqlError::new("22023", "unsupported format code"));
    }
    Ok(())
}

/// DataRows for `rows`, with per-column formats and types.
pub fn encode_rows(out: &mut BytesMut, rows: ResultRows<'_>, formats: &[i16], col_types: &[Option<DataType>], scratch: &mut String, ends: Option<&mut Vec<usize>>) {
    use bytes::BufMut;
    let width = rows.width;
    let mut ends = ends;
    for r in 0..rows.rows {
        out.put_u8(b'D');
        let at = out.len();
        out.put_i32(0);
        out.put_i16(i16::try_from(width).unwrap_or(i16::MAX));
        let row = rows.values.get(r * width..(r + 1) * width).unwrap_or(&[]);
        for (c, v) in row.iter().enumerate() {
            if v.is_null() {
                out.put_i32(-1);
                continue;
            }
            let len_at = out.len();
            out.put_i32(0);
            if formats.get(c).copied().unwrap_or(0) == 1 {
                types::encode_binary(v, col_types.get(c).copied().flatten(), out);
            } else {
                types::encode_text(v, out, scratch);
            }
            let len = i32::try_from(out.len() - len_at - 4).unwrap_or(i32::MAX);
            out[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
        }
        let len = i32::try_from(out.len() - at).unwrap_or(i32::MAX);
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
        if let Some(e) = ends.as_deref_mut() {
            e.push(out.len());
        }
    }
}

fn row_description(columns: &[Column], formats: &[i16]) -> PgWireBackendMessage {
    let fields = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (oid, size, modifier) = match c.ty {
                Some(t) => (types::oid(t), types::type_size(t), types::type_modifier(t)),
                None => (types::TEXT, -1, -1),
            };
            FieldDescription::new(c.name.clone(), 0, 0, oid, size, modifier, formats.get(i).copied().unwrap_or(0))
        })
        .collect();
    PgWireBackendMessage::RowDescription(RowDescription::new(fields))
}

fn classify(stmt: &Statement) -> (TxnKind, bool) {
    match stmt {
        Statement::StartTransaction { .. } => (TxnKind::Begin, false),
        Statement::Commit { .. } => (TxnKind::End(true), false),
        Statement::Rollback { .. } => (TxnKind::End(false), false),
        Statement::Set(_) => (TxnKind::None, true),
        _ => (TxnKind::None, false),
    }
}

impl Session {
    fn new(shared: &Shared, wire: Wire, cancel: Arc<AtomicBool>) -> Session {
        let mut conn = Connection::new(shared.db.clone());
        conn.set_cancel_flag(Arc::clone(&cancel));
        Session {
            wire,
            conn,
            statements: HashMap::new(),
            unnamed_stmt: None,
            portals: HashMap::new(),
            unnamed_portal: Portal::default(),
            by_text: HashMap::new(),
            cancel,
            skip_until_sync: false,
            closing: false,
            error_position: None,
            implicit: false,
            reported: Vec::new(),
            scratch: String::new(),
            frame: Vec::new(),
            remote: shared.passthrough.clone(),
            backend_block: None,
        }
    }

    /// Startup parameters (`application_name`, `DateStyle`, `options=-c
    /// x=y`, ...) become session settings; the reportable ones are then
    /// sent with ParameterStatus, as PostgreSQL does after AuthenticationOk.
    /// `synchronous_commit` already starts as the server's `commit_mode`
    /// (the sql Connection sets it); a startup option can change it.
    fn apply_startup_parameters(&mut self, startup: &Startup, user: &str) {
        let mut settings: Vec<(String, String)> = Vec::new();
        for (k, v) in &startup.parameters {
            match k.as_str() {
                "user" | "database" | "replication" => {}
                "options" => settings.extend(parse_options(v)),
                _ if k.starts_with("_pq_.") => {}
                _ => settings.push((k.clone(), v.clone())),
            }
        }
        for (name, value) in settings {
            // Only names of known settings reach the SQL text (no quoting
            // games with identifiers).
            let plain = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !plain || self.conn.setting(&name).is_none() {
                continue;
            }
            let sql = format!("SET {name} TO '{}'", value.replace('\'', "''"));
            let result = self.conn.parse_statements(&sql).and_then(|mut s| match s.pop() {
                Some(stmt) => self.conn.prepare_statement(stmt).and_then(|ps| self.conn.execute(&ps, &[])),
                None => Ok(0),
            });
            // A client encoding or time zone pgtier cannot honour is not
            // worth refusing the connection: warn, keep UTF8 / UTC.
            if let Err(e) = result {
                self.wire.notice(&SqlError::new("01000", format!("startup parameter {name} = {value:?} ignored: {}", e.message)), "WARNING");
            }
        }
        self.reported = REPORTED.iter().map(|(_, key)| self.conn.setting(key).unwrap_or("").to_owned()).collect();
        for (i, (name, _)) in REPORTED.iter().enumerate() {
            let value = self.reported[i].clone();
            self.wire.parameter_status(name, &value);
        }
        for (name, value) in [("session_authorization", user), ("default_transaction_read_only", "off"), ("in_hot_standby", "off")] {
            self.wire.parameter_status(name, value);
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
        let _ = self.wire.flush();
        if self.conn.in_transaction() {
            let _ = self.conn.rollback();
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

    /// Serves messages until the session ends (false) or, with `park`,
    /// until the next message has not arrived (true).
    fn run_until(&mut self, park: bool) -> bool {
        loop {
            if self.closing {
                let _ = self.wire.flush();
                return false;
            }
            if self.wire.wbuf.len() >= WRITE_FLUSH_BYTES && self.wire.flush().is_err() {
                return false;
            }
            // Only here, between messages, may a session stop for want of
            // input: reads inside a message or a COPY still wait.
            let tag = match self.wire.read_frame_between(park) {
                Ok(t) => t,
                Err(ReadError::WouldBlock) => return true,
                Err(ReadError::Closed) => return false,
                Err(ReadError::Protocol(m)) => {
                    fatal(&mut self.wire, "08P01", &m);
                    return false;
                }
            };
            // Bind, Execute and Sync, the messages of every prepared-statement
            // round trip, are read in place; the rest through pgwire.
            match tag {
                b'S' => {
                    self.wire.consume_frame();
                    self.skip_until_sync = false;
                    self.end_implicit_block();
                    let status = self.status_byte();
                    self.wire.ready_for_query(status);
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
                    self.simple_query(&q.query);
                    let status = self.status_byte();
                    self.wire.ready_for_query(status);
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

    // ------------------------------------------------------------ statements

    /// Parses and plans `sql` (one statement), re-using a cached plan for
    /// the same text.
    fn statement(&mut self, sql: &str, declared: &[u32]) -> Result<Arc<Stmt>, SqlError> {
        if let Some(s) = self.by_text.get(sql)
            && s.declared == declared
        {
            let s = s.clone();
            if self.conn.transaction_status() == TransactionStatus::Failed && !matches!(s.txn, TxnKind::End(_)) {
                return Err(SqlError::transaction_aborted());
            }
            return Ok(s);
        }
        let mut stmts = self.conn.parse_statements(sql)?;
        if stmts.len() > 1 {
            return Err(SqlError::syntax("cannot insert multiple commands into a prepared statement"));
        }
        let stmt = self.build(stmts.pop(), declared.to_vec())?;
        if matches!(stmt.kind, Kind::Sql(_)) {
            if self.by_text.len() >= TEXT_CACHE_MAX {
                self.by_text.clear();
            }
            self.by_text.insert(sql.to_owned(), stmt.clone());
        }
        Ok(stmt)
    }

    fn build(&mut self, ast: Option<Statement>, declared: Vec<u32>) -> Result<Arc<Stmt>, SqlError> {
        let Some(ast) = ast else { return Ok(Arc::new(Stmt::new(Kind::Empty, declared, TxnKind::None, false))) };
        let (txn, is_set) = classify(&ast);
        if let Statement::Copy { .. } | Statement::Prepare { .. } | Statement::Execute { .. } | Statement::Deallocate { .. } = ast {
            if self.conn.transaction_status() == TransactionStatus::Failed {
                return Err(SqlError::transaction_aborted());
            }
            let kind = if matches!(ast, Statement::Copy { .. }) { Kind::Copy(Box::new(ast)) } else { Kind::Utility(Box::new(ast)) };
            return Ok(Arc::new(Stmt::new(kind, declared, txn, is_set)));
        }
        // The AST is kept (cloned) only when passthrough may need it after
        // pgtier's binder refused the statement.
        // With passthrough on, a bind error does not fail an open block
        // here: the statement may still run on PostgreSQL, in the block.
        // Errors returned fail it (every caller reports them that way).
        let kept = self.remote.as_ref().map(|pool| (pool.mode, ast.clone()));
        let bound = if kept.is_some() { self.conn.try_prepare_statement(ast) } else { self.conn.prepare_statement(ast) };
        let ps = match (bound, kept) {
            (Ok(ps), _) => ps,
            (Err(e), None) => return Err(e),
            (Err(e), Some((mode, ast))) => {
                let catalog = self.conn.database().catalog();
                let remote = crate::passthrough::decide(mode, &ast, e, |n| catalog.table_by_name(n).is_some())?;
                return Ok(Arc::new(Stmt::new(Kind::Remote(Box::new(remote)), declared, txn, is_set)));
            }
        };
        Ok(Arc::new(Stmt::new(Kind::Sql(Box::new(ps)), declared, txn, is_set)))
    }

    /// PostgreSQL's warnings for BEGIN inside a block and COMMIT/ROLLBACK
    /// outside one.
    fn txn_notice(&mut self, txn: TxnKind) {
        let status = self.conn.transaction_status();
        match (txn, status) {
            (TxnKind::Begin, TransactionStatus::InBlock | TransactionStatus::Failed) => {
                self.wire.notice(&SqlError::new("25001", "there is already a transaction in progress"), "WARNING");
            }
            (TxnKind::End(_), TransactionStatus::Idle) => {
                self.wire.notice(&SqlError::new("25P01", "there is no transaction in progress"), "WARNING");
            }
            _ => {}
        }
    }

    // ------------------------------------------------------------ simple query

    fn simple_query(&mut self, sql: &str) {
        let result = self.simple_query_inner(sql);
        self.forward_notices();
        if let Err(e) = result {
            self.conn.statement_failed();
            self.wire.error_at(&e, "ERROR", e.position_in(sql));
        }
    }

    fn simple_query_inner(&mut self, sql: &str) -> Result<(), SqlError> {
        // The common case, one statement, goes through the text cache.
        if let Some(s) = self.by_text.get(sql).cloned() {
            return self.simple_one(&s);
        }
        if sql.trim().trim_end_matches(';').trim().eq_ignore_ascii_case("checkpoint") {
            // PostgreSQL's CHECKPOINT: here the engine's (WAL truncated
            // below it, so the next start replays little).
            self.conn.database().checkpoint()?;
            self.wire.command_complete("CHECKPOINT");
            return Ok(());
        }
        let stmts = self.conn.parse_statements(sql)?;
        if stmts.is_empty() {
            self.wire.empty_query();
            return Ok(());
        }
        if stmts.len() == 1 {
            let s = self.statement(sql, &[])?;
            return self.simple_one(&s);
        }
        // Several statements run as one implicit transaction unless they
        // manage transactions themselves (PostgreSQL's rule, simplified).
        let implicit = self.conn.transaction_status() == TransactionStatus::Idle
            && !stmts.iter().any(|s| classify(s).0 != TxnKind::None);
        if implicit {
            self.conn.begin()?;
        }
        for ast in stmts {
            if self.cancel.swap(false, Ordering::Relaxed) {
                self.end_implicit(implicit, false);
                return Err(SqlError::canceled());
            }
            let result = self.build(Some(ast), Vec::new()).and_then(|s| self.simple_one(&s));
            if let Err(e) = result {
                self.end_implicit(implicit, false);
                return Err(e);
            }
        }
        if implicit { self.end_block(true) } else { Ok(()) }
    }

    fn end_implicit(&mut self, implicit: bool, commit: bool) {
        if implicit {
            let _ = self.end_block(commit);
        }
    }

    /// Ends the open block (explicit or implicit): PostgreSQL's part first
    /// when passthrough statements ran in it, so a failing PostgreSQL
    /// COMMIT rolls pgtier's part back as well (its error is returned).
    fn end_block(&mut self, commit: bool) -> Result<(), SqlError> {
        let commit = commit && self.conn.transaction_status() == TransactionStatus::InBlock;
        if let Err(e) = self.end_backend_block(commit) {
            let _ = self.conn.rollback();
            return Err(e);
        }
        if commit { self.conn.commit() } else { self.conn.rollback() }
    }

    /// Before a COMMIT or ROLLBACK statement runs: ends PostgreSQL's part of
    /// the block (see `end_block`). On error pgtier's part is rolled back.
    fn before_block_end(&mut self, txn: TxnKind) -> Result<(), SqlError> {
        let TxnKind::End(commit) = txn else { return Ok(()) };
        let commit = commit && self.conn.transaction_status() == TransactionStatus::InBlock;
        self.end_backend_block(commit).inspect_err(|_| {
            let _ = self.conn.rollback();
        })
    }

    fn end_backend_block(&mut self, commit: bool) -> Result<(), SqlError> {
        match self.backend_block.take() {
            Some(block) if commit => block.commit(),
            Some(block) => {
                block.rollback();
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn simple_one(&mut self, s: &Arc<Stmt>) -> Result<(), SqlError> {
        match &s.kind {
            Kind::Empty => {
                self.wire.empty_query();
                Ok(())
            }
            Kind::Copy(ast) => self.copy(ast, false),
            Kind::Utility(ast) => self.utility(ast),
            Kind::Remote(r) => {
                let mut backend = self.backend()?;
                let result = r.run_simple(backend.lease(), &mut self.wire.wbuf);
                self.keep_backend(backend);
                result
            }
            Kind::Sql(ps) => {
                if s.txn != TxnKind::None {
                    self.txn_notice(s.txn);
                }
                self.before_block_end(s.txn)?;
                self.run_statement(s, ps, &[], None, true)?;
                if s.is_set {
                    self.report_changes();
                }
                Ok(())
            }
        }
    }

    /// The backend connection for a passthrough statement about to run:
    /// inside a transaction block (explicit, a multi-statement Query, or the
    /// implicit block of an extended-protocol batch) the block's own, leased
    /// with a transaction opened on its first use; otherwise one for this
    /// statement alone, which commits on PostgreSQL by itself.
    fn backend(&mut self) -> Result<Backend, SqlError> {
        let pool = self.remote.clone().ok_or_else(|| SqlError::new("0A000", "passthrough is off"))?;
        if !self.implicit && self.conn.transaction_status() == TransactionStatus::Idle {
            // Every way a block ends goes through `end_block` or
            // `before_block_end`; a connection left over would otherwise
            // commit with some later block.
            if let Some(stale) = self.backend_block.take() {
                debug_assert!(false, "a block's backend connection outlived its block");
                stale.rollback();
            }
            return Ok(Backend::Statement(pool.lease()?));
        }
        match self.backend_block.take() {
            Some(block) => Ok(Backend::Block(block)),
            None => Ok(Backend::Block(crate::passthrough::BlockLease::begin(&pool)?)),
        }
    }

    /// Keeps a block's backend connection for the block's next statements.
    fn keep_backend(&mut self, backend: Backend) {
        if let Backend::Block(block) = backend {
            self.backend_block = Some(block);
        }
    }

    /// Execute of a passthrough portal: all rows are fetched from
    /// PostgreSQL, then handed out per Execute like a local portal's.
    fn remote_execute(&mut self, r: &crate::passthrough::Remote, portal: &mut Portal, max_rows: i32) -> Result<(), SqlError> {
        let mut backend = self.backend()?;
        let fetched = r.run_extended(backend.lease(), &portal.raw, &portal.formats, &mut self.wire.wbuf);
        self.keep_backend(backend);
        let (rows, ends, tag) = fetched?;
        let mut pending = Pending { rows, ends, sent: 0, tag };
        self.send_pending(&mut pending, max_rows);
        if pending.sent < pending.ends.len() {
            portal.pending = Some(pending);
        }
        Ok(())
    }

    /// Executes and streams the rows (text format unless `formats`).
    fn run_statement(&mut self, s: &Stmt, ps: &PreparedStatement, params: &[Value], formats: Option<&[i16]>, describe: bool) -> Result<(), SqlError> {
        let wire = &mut self.wire;
        let scratch = &mut self.scratch;
        let returns_rows = s.returns_rows;
        let result = self.conn.execute_with(ps, params, |rows| {
            if !returns_rows {
                return;
            }
            s.refresh_columns();
            let info = s.columns.lock();
            if describe {
                let text = vec![0i16; info.columns.len()];
                wire.send(row_description(&info.columns, formats.unwrap_or(&text)));
            }
            encode_rows(&mut wire.wbuf, rows, formats.unwrap_or(&[]), &info.types, scratch, None);
        });
        self.forward_notices();
        let (tag, ()) = match (result, &self.remote) {
            (Err(e), Some(_)) => return Err(crate::passthrough::refuse_ddl(e)),
            (result, _) => result?,
        };
        self.wire.command_complete(tag);
        Ok(())
    }

    /// Sync (or a Query) ends the implicit block: commit, or roll back
    /// after an error. A failing COMMIT is reported before ReadyForQuery.
    fn end_implicit_block(&mut self) {
        if !std::mem::take(&mut self.implicit) {
            return;
        }
        let result = match self.conn.transaction_status() {
            TransactionStatus::InBlock => self.end_block(true),
            TransactionStatus::Failed => self.end_block(false),
            TransactionStatus::Idle => Ok(()),
        };
        if let Err(e) = result {
            self.wire.error(&e, "ERROR");
        }
    }

    /// NOTICEs the statement raised (IF [NOT] EXISTS skips, ...).
    fn forward_notices(&mut self) {
        for n in self.conn.take_notices() {
            self.wire.notice(&SqlError::new(n.sqlstate, n.message), "NOTICE");
        }
    }

    // ------------------------------------------------------------ extended

    fn parse(&mut self, m: Parse) -> Result<(), SqlError> {
        let stmt = match self.statement(&m.query, &m.type_oids) {
            Ok(s) => s,
            Err(e) => {
                self.error_position = e.position_in(&m.query);
                return Err(e);
            }
        };
        if let Kind::Remote(r) = &stmt.kind
            && !r.is_described()
        {
            // Inside a block on the block's own connection: a second lease
            // could wait forever on a pool the open blocks hold.
            let mut backend = self.backend()?;
            let described = r.describe_on(backend.lease(), &m.type_oids);
            self.keep_backend(backend);
            described?;
        }
        match m.name {
            Some(name) => {
                if self.statements.contains_key(&name) {
                    return Err(SqlError::new("42P05", format!("prepared statement \"{name}\" already exists")));
                }
                self.statements.insert(name, stmt);
            }
            None => self.unnamed_stmt = Some(stmt),
        }
        self.wire.parse_complete();
        Ok(())
    }

    fn find_statement(&self, name: Option<&str>) -> Result<Arc<Stmt>, SqlError> {
        let found = match name {
            None => self.unnamed_stmt.clone(),
            Some(n) => self.statements.get(n).cloned(),
        };
        found.ok_or_else(|| SqlError::new("26000", format!("prepared statement \"{}\" does not exist", name.unwrap_or(""))))
    }

    fn bind(&mut self, m: &BindRef<'_>) -> Result<(), SqlError> {
        let stmt = self.find_statement(m.statement_name.as_deref())?;
        if self.conn.transaction_status() == TransactionStatus::Failed && !matches!(stmt.txn, TxnKind::End(_)) {
            return Err(SqlError::transaction_aborted());
        }
        let mut portal = match m.portal_name.as_deref() {
            None => std::mem::take(&mut self.unnamed_portal),
            Some(name) if self.portals.contains_key(name) => {
                return Err(SqlError::new("42P03", format!("portal \"{name}\" already exists")));
            }
            Some(_) => Portal::default(),
        };
        let result = fill_portal(&mut portal, &stmt, m);
        portal.stmt = Some(stmt);
        portal.pending = None;
        match &m.portal_name {
            None => self.unnamed_portal = portal,
            Some(name) => {
                if result.is_ok() {
                    self.portals.insert(name.clone().into_owned(), portal);
                }
            }
        }
        result?;
        self.wire.bind_complete();
        Ok(())
    }

    fn describe(&mut self, m: &Describe) -> Result<(), SqlError> {
        if m.target_type == b'S' {
            let stmt = self.find_statement(m.name.as_deref())?;
            let oids = match &stmt.kind {
                Kind::Remote(r) => r.param_oids(),
                _ => (0..stmt.param_types.len().max(stmt.declared.len())).map(|i| stmt.param_oid(i)).collect(),
            };
            self.wire.send(PgWireBackendMessage::ParameterDescription(ParameterDescription::new(oids)));
            self.describe_rows(&stmt, &[]);
            return Ok(());
        }
        let portal = match m.name.as_deref() {
            None => &self.unnamed_portal,
            Some(n) => self.portals.get(n).ok_or_else(|| SqlError::new("34000", format!("portal \"{n}\" does not exist")))?,
        };
        let Some(stmt) = portal.stmt.clone() else {
            return Err(SqlError::new("34000", "portal \"\" does not exist"));
        };
        let formats = portal.formats.clone();
        self.describe_rows(&stmt, &formats);
        Ok(())
    }

    fn describe_rows(&mut self, stmt: &Stmt, formats: &[i16]) {
        if let Kind::Remote(r) = &stmt.kind {
            r.describe_rows(&mut self.wire, formats);
            return;
        }
        if !stmt.returns_rows {
            self.wire.no_data();
            return;
        }
        stmt.refresh_columns();
        let info = stmt.columns.lock();
        self.wire.send(row_description(&info.columns, formats));
    }

    fn execute(&mut self, name: Option<&str>, max_rows: i32) -> Result<(), SqlError> {
        let mut portal = match name {
            None => std::mem::take(&mut self.unnamed_portal),
            Some(n) => self.portals.remove(n).ok_or_else(|| SqlError::new("34000", format!("portal \"{n}\" does not exist")))?,
        };
        let result = self.execute_portal(&mut portal, max_rows);
        match name {
            None => self.unnamed_portal = portal,
            Some(n) => {
                self.portals.insert(n.to_owned(), portal);
            }
        }
        result
    }

    fn execute_portal(&mut self, portal: &mut Portal, max_rows: i32) -> Result<(), SqlError> {
        let Some(stmt) = portal.stmt.clone() else {
            return Err(SqlError::new("34000", "portal \"\" does not exist"));
        };
        if let Some(p) = &mut portal.pending {
            self.send_pending(p, max_rows);
            if p.sent == p.ends.len() {
                portal.pending = None;
            }
            return Ok(());
        }
        match &stmt.kind {
            Kind::Empty => {
                self.wire.empty_query();
                Ok(())
            }
            Kind::Copy(ast) => self.copy(ast, true),
            Kind::Utility(ast) => self.utility(ast),
            Kind::Remote(r) => self.remote_execute(r, portal, max_rows),
            Kind::Sql(ps) => {
                if stmt.txn != TxnKind::None && !self.implicit {
                    self.txn_notice(stmt.txn);
                }
                self.before_block_end(stmt.txn)?;
                match stmt.txn {
                    // Several Executes before Sync are one transaction, as
                    // in PostgreSQL (a driver's batch is atomic). A lone
                    // Execute followed by Sync needs no block: autocommit
                    // does the same with less work.
                    TxnKind::None => {
                        if !self.implicit && self.conn.transaction_status() == TransactionStatus::Idle && self.wire.rbuf.first() != Some(&b'S') {
                            self.conn.begin()?;
                            self.implicit = true;
                        }
                    }
                    // BEGIN makes the implicit block explicit; COMMIT and
                    // ROLLBACK end it.
                    TxnKind::Begin | TxnKind::End(_) => self.implicit = false,
                }
                if max_rows > 0 && stmt.returns_rows {
                    let mut pending = self.run_to_pending(&stmt, ps, portal)?;
                    self.send_pending(&mut pending, max_rows);
                    if pending.sent < pending.ends.len() {
                        portal.pending = Some(pending);
                    }
                } else {
                    self.run_statement(&stmt, ps, &portal.params, Some(&portal.formats), false)?;
                }
                if stmt.is_set {
                    self.report_changes();
                }
                Ok(())
            }
        }
    }

    /// Runs a portal whose rows are fetched in pieces (Execute with a row
    /// limit): the rows are encoded once and handed out per Execute.
    fn run_to_pending(&mut self, stmt: &Stmt, ps: &PreparedStatement, portal: &Portal) -> Result<Pending, SqlError> {
        let mut rows = BytesMut::new();
        let mut ends = Vec::new();
        let scratch = &mut self.scratch;
        let (tag, ()) = self.conn.execute_with(ps, &portal.params, |r| {
            stmt.refresh_columns();
            let info = stmt.columns.lock();
            encode_rows(&mut rows, r, &portal.formats, &info.types, scratch, Some(&mut ends));
        })?;
        Ok(Pending { rows, ends, sent: 0, tag: tag.to_string() })
    }

    fn send_pending(&mut self, p: &mut Pending, max_rows: i32) {
        let limit = usize::try_from(max_rows).ok().filter(|&n| n > 0).unwrap_or(usize::MAX);
        let from = if p.sent == 0 { 0 } else { p.ends[p.sent - 1] };
        let upto = p.sent.saturating_add(limit).min(p.ends.len());
        let to = if upto == 0 { 0 } else { p.ends[upto - 1] };
        self.wire.wbuf.extend_from_slice(&p.rows[from..to]);
        p.sent = upto;
        if p.sent < p.ends.len() {
            self.wire.portal_suspended();
        } else {
            self.wire.command_complete(&p.tag);
        }
    }

    fn close(&mut self, m: &Close) -> Result<(), SqlError> {
        match (m.target_type, m.name.as_deref()) {
            (b'S', None) => self.unnamed_stmt = None,
            (b'S', Some(n)) => {
                self.statements.remove(n);
            }
            (_, None) => self.unnamed_portal = Portal::default(),
            (_, Some(n)) => {
                self.portals.remove(n);
            }
        }
        self.wire.close_complete();
        Ok(())
    }

    /// PREPARE name [(types)] AS stmt, EXECUTE name [(args)], DEALLOCATE
    /// [PREPARE] name | ALL.
    fn utility(&mut self, ast: &Statement) -> Result<(), SqlError> {
        match ast {
            Statement::Prepare { name, data_types, statement } => {
                let name = ident_name(name);
                if self.statements.contains_key(&name) {
                    return Err(SqlError::new("42P05", format!("prepared statement \"{name}\" already exists")));
                }
                let declared = data_types.iter().map(|t| declared_oid(&t.to_string())).collect();
                let stmt = self.build(Some((**statement).clone()), declared)?;
                self.statements.insert(name, stmt);
                self.wire.command_complete("PREPARE");
                Ok(())
            }
            Statement::Execute { name: Some(name), parameters, .. } => {
                let name = name.0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(".");
                let name = if name.starts_with('"') { name.trim_matches('"').to_owned() } else { name.to_lowercase() };
                let stmt = self.find_statement(Some(&name))?;
                let Kind::Sql(ps) = &stmt.kind else {
                    return Err(SqlError::unsupported("EXECUTE of this statement"));
                };
                if parameters.len() != stmt.param_types.len() {
                    return Err(SqlError::new(
                        "42601",
                        format!("wrong number of parameters for prepared statement \"{name}\""),
                    )
                    .with_detail(format!("Expected {} parameters but got {}.", stmt.param_types.len(), parameters.len())));
                }
                let mut params = Vec::with_capacity(parameters.len());
                if !parameters.is_empty() {
                    // The arguments are expressions: evaluate them as a
                    // SELECT, each cast to its parameter's type there (so a
                    // literal is read in that type's context, as PostgreSQL
                    // does: -1e300 for a double precision parameter).
                    let list = parameters
                        .iter()
                        .zip(&stmt.param_types)
                        .map(|(p, ty)| format!("CAST(({p}) AS {})", pgtier_sql::value::full_type_name(*ty)))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let probe = self.prepare_text(&format!("SELECT {list}"))?;
                    let (_, values) = self.conn.execute_with(&probe, &[], |r| r.values.to_vec())?;
                    for (v, ty) in values.into_iter().zip(&stmt.param_types) {
                        params.push(pgtier_sql::value::cast(v, *ty, true)?);
                    }
                }
                self.run_statement(&stmt, ps, &params, None, true)
            }
            Statement::Deallocate { name, .. } => {
                if name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all") {
                    self.statements.clear();
                    self.wire.command_complete("DEALLOCATE ALL");
                    return Ok(());
                }
                let name = ident_name(name);
                if self.statements.remove(&name).is_none() {
                    return Err(SqlError::new("26000", format!("prepared statement \"{name}\" does not exist")));
                }
                self.wire.command_complete("DEALLOCATE");
                Ok(())
            }
            other => Err(SqlError::unsupported(other.to_string())),
        }
    }

    /// Runs a statement given as text (COPY's own queries).
    pub(crate) fn prepare_text(&mut self, sql: &str) -> Result<PreparedStatement, SqlError> {
        let mut stmts = self.conn.parse_statements(sql)?;
        let stmt = stmts.pop().ok_or_else(|| SqlError::syntax("empty statement"))?;
        self.conn.prepare_statement(stmt)
    }
}

/// Decodes Bind's parameters and result formats into `portal`.
fn fill_portal(portal: &mut Portal, stmt: &Stmt, m: &BindRef<'_>) -> Result<(), SqlError> {
    if let Kind::Remote(r) = &stmt.kind {
        // Passthrough keeps the values as sent: owned copies (not the hot path).
        let params: Vec<Option<Bytes>> = m.parameters().map(|p| p.map(Bytes::copy_from_slice)).collect();
        let formats: Vec<i16> = m.parameter_format_codes.iter().collect();
        let ncols = r.bind(&mut portal.raw, &params, &formats, m.statement_name.as_deref().unwrap_or(""))?;
        return expand_formats(m.result_column_format_codes, ncols, &mut portal.formats);
    }
    let n = m.param_count;
    // A client may declare more parameters than the statement uses.
    let needed = stmt.param_types.len().max(stmt.declared.len());
    if n != needed {
        return Err(SqlError::new(
            "08P01",
            format!("bind message supplies {n} parameters, but prepared statement \"{}\" requires {needed}", m.statement_name.as_deref().unwrap_or("")),
        ));
    }
    let fcodes = m.parameter_format_codes;
    if !(fcodes.len() <= 1 || fcodes.len() == n) {
        return Err(SqlError::new("08P01", format!("bind message has {} parameter formats but {n} parameters", fcodes.len())));
    }
    portal.params.clear();
    for (i, p) in m.parameters().enumerate() {
        let Some(bytes) = p else {
            portal.params.push(Value::Null);
            continue;
        };
        let format = match fcodes.len() {
            0 => 0,
            1 => fcodes.get(0).unwrap_or(0),
            _ => fcodes.get(i).unwrap_or(0),
        };
        let declared = stmt.declared.get(i).copied().unwrap_or(0);
        let Some(&inferred) = stmt.param_types.get(i) else {
            // Declared but unused: nothing reads it.
            portal.params.push(Value::Null);
            continue;
        };
        portal.params.push(types::decode(bytes, format == 0, declared, inferred, types::Origin::Param(i + 1))?);
    }
    let ncols = stmt.columns.lock().columns.len();
    expand_formats(m.result_column_format_codes, ncols, &mut portal.formats)
}

/// An SQL identifier as PostgreSQL folds it (unquoted: lower case).
fn ident_name(i: &sqlparser::ast::Ident) -> String {
    if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() }
}

/// The OID of a type named in PREPARE's list (0: infer it).
fn declared_oid(name: &str) -> u32 {
    match name.to_lowercase().split('(').next().unwrap_or("").trim() {
        "int" | "integer" | "int4" => types::INT4,
        "smallint" | "int2" => types::INT2,
        "bigint" | "int8" => types::INT8,
        "real" | "float4" => types::FLOAT4,
        "double precision" | "float8" | "float" => types::FLOAT8,
        "numeric" | "decimal" => types::NUMERIC,
        "boolean" | "bool" => types::BOOL,
        "date" => types::DATE,
        "timestamp" => types::TIMESTAMP,
        "bytea" => types::BYTEA,
        _ => 0,
    }
}

/// `-c name=value` / `--name=value` pairs of the `options` parameter.
fn parse_options(options: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut words = options.split_whitespace();
    while let Some(w) = words.next() {
        let pair = if w == "-c" { words.next() } else { w.strip_prefix("--").or_else(|| w.strip_prefix("-c")) };
        if let Some((k, v)) = pair.and_then(|p| p.split_once('=')) {
            out.push((k.replace('-', "_"), v.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parameter() {
        assert_eq!(parse_options("-c search_path=x --application-name=y"), vec![("search_path".into(), "x".into()), ("application_name".into(), "y".into())]);
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
