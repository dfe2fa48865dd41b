//! Passthrough: statements on tables pgtier does not hold go to the backend
//! PostgreSQL (DESIGN.md §3, after TimesTen's PassThrough levels).
//!
//! The decision is made only after pgtier's own binder failed with 42P01
//! "relation ... does not exist" (or 3F000 for an unknown schema): a
//! statement pgtier can answer is never sent anywhere, and a statement that
//! names any table pgtier holds is never sent either (it would read
//! PostgreSQL's copy instead of the cache). See README.md "Passthrough".
//!
//! Why a small protocol client of our own instead of the `postgres` crate:
//! a passthrough must hand the client exactly what PostgreSQL produced —
//! parameters in the client's formats, results in the formats the client
//! asked for per column, the backend's RowDescription and command tag.
//! `postgres` always asks for binary results and hides the raw messages;
//! with our own framing DataRow and CommandComplete are copied verbatim and
//! no value is ever converted. `postgres_protocol` writes the frontend
//! messages and does SCRAM; `postgres::Config` parses the URL; TLS is
//! rustls (tls.rs). The backend and its password come from `[backend]`
//! (`pgtier_backend::ConnectParams`).
//!
//! Connections are pooled (bounded by `pool_size`); a session that finds
//! all of them busy waits up to [`POOL_WAIT`], then gets 53300. A
//! connection that failed mid-exchange is dropped, never reused.
//!
//! Outside a transaction block each statement leases a connection and
//! commits on PostgreSQL by itself. Inside one, the block's first
//! passthrough statement leases a connection and opens a transaction on it
//! ([`BlockLease`]); the block's later passthrough statements run there.
//! The lease is kept by [`BlockBackend`], the session Connection's commit
//! participant (`pgtier_sql::session::CommitParticipant`): the Connection
//! commits PostgreSQL's part before its own and rolls it back with its
//! own. A failing PostgreSQL COMMIT therefore rolls pgtier's part back too;
//! the one window that is not atomic is pgtier's own commit failing after
//! PostgreSQL's succeeded (an I/O error on pgtier's log).

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use parking_lot::{Condvar, Mutex};
use pgtier_sql::session::{CommitParticipant, Fallback, Stmt};
use pgtier_sql::{Connection, Database, SqlError};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::{FieldDescription, RowDescription};
use postgres::config::Host;
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::frontend;
use sqlparser::ast::{SetExpr, Statement};

use crate::config::PassthroughMode;
use crate::session::Session;
use crate::tls::{BackendTls, Negotiated};
use crate::wire::Wire;

/// How long a session waits for a free backend connection.
pub const POOL_WAIT: Duration = Duration::from_secs(5);
/// Connect and authentication timeout when the URL sets none.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A backend message larger than this is treated as a broken connection
/// (bounds what one row can make us allocate).
const MAX_BACKEND_MESSAGE: usize = 1 << 30;

/// What kind of statement a passthrough candidate is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// SELECT without FOR UPDATE/SHARE.
    Read,
    /// INSERT / UPDATE / DELETE / MERGE, or SELECT ... FOR UPDATE.
    Write,
    /// CREATE / DROP / ALTER / TRUNCATE / ...: never passed through.
    Ddl,
    /// Anything else (EXPLAIN, CALL, ...): not passed through.
    Other,
}

pub fn classify(ast: &Statement) -> Class {
    use Statement as S;
    match ast {
        S::Query(q) => match &*q.body {
            SetExpr::Select(s) if s.into.is_some() => Class::Ddl,
            SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => Class::Write,
            _ if !q.locks.is_empty() => Class::Write,
            // A data-modifying WITH query writes, whatever reads it.
            _ if q.with.as_ref().is_some_and(|w| {
                w.cte_tables.iter().any(|c| {
                    matches!(
                        *c.query.body,
                        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_)
                    )
                })
            }) =>
            {
                Class::Write
            }
            _ => Class::Read,
        },
        S::Insert(_) | S::Update(_) | S::Delete(_) | S::Merge(_) => Class::Write,
        S::CreateTable(_)
        | S::CreateView { .. }
        | S::CreateIndex(_)
        | S::CreateSchema { .. }
        | S::CreateSequence { .. }
        | S::CreateType { .. }
        | S::CreateFunction(_)
        | S::CreateTrigger(_)
        | S::CreateExtension(_)
        | S::AlterTable(_)
        | S::AlterIndex { .. }
        | S::AlterView { .. }
        | S::AlterType(_)
        | S::AlterRole { .. }
        | S::AlterSchema(_)
        | S::Drop { .. }
        | S::DropFunction(_)
        | S::DropTrigger(_)
        | S::DropExtension(_)
        | S::Truncate(_)
        | S::Comment { .. }
        | S::Grant(_)
        | S::Revoke(_) => Class::Ddl,
        _ => Class::Other,
    }
}

/// A statement that runs on PostgreSQL instead of pgtier.
pub struct Remote {
    /// The text sent to PostgreSQL (the statement as pgtier's parser prints
    /// it back).
    pub sql: String,
    /// Learned at Parse (extended protocol); a simple query does not need it.
    described: std::sync::OnceLock<Described>,
}

struct Described {
    param_oids: Vec<u32>,
    /// None: the statement returns no rows (NoData).
    fields: Option<Vec<Field>>,
}

struct Field {
    name: String,
    table_oid: i32,
    column: i16,
    type_oid: u32,
    size: i16,
    modifier: i32,
}

/// A passthrough Execute's result: DataRow messages as PostgreSQL sent
/// them, the end of each in that buffer, and the command tag.
pub type Fetched = (BytesMut, Vec<usize>, String);

/// A portal's parameters as the client sent them, for PostgreSQL.
#[derive(Default)]
pub struct RawParams {
    values: Vec<Option<Bytes>>,
    formats: Vec<i16>,
}

/// Is `e` pgtier's "this relation (or schema) does not exist"? Only those
/// errors can make a statement a passthrough candidate; "missing
/// FROM-clause entry" (also 42P01) and system-catalog names never do.
fn names_unknown_relation(e: &SqlError) -> bool {
    let relation = e.sqlstate == "42P01" && e.message.starts_with("relation \"");
    let schema = e.sqlstate == "3F000" && e.message.starts_with("schema \"");
    let system = e.message.contains("\"pg_catalog.") || e.message.contains("\"information_schema.");
    (relation || schema) && !system
}

/// Decides what happens to a statement pgtier's binder refused with `err`:
/// Ok(Remote) to pass it through, or the error the client gets. `held`
/// tells whether pgtier holds a table of that (folded) name.
pub fn decide(
    mode: PassthroughMode,
    ast: &Statement,
    err: SqlError,
    held: impl Fn(&str) -> bool,
) -> Result<Remote, SqlError> {
    if mode == PassthroughMode::Off || !names_unknown_relation(&err) {
        return Err(err);
    }
    match classify(ast) {
        Class::Read => {}
        Class::Write if mode == PassthroughMode::All => {}
        Class::Write => {
            return Err(SqlError::new(
                "25006",
                format!(
                    "cannot write to a table pgtier does not hold: passthrough mode is \"reads\" ({})",
                    err.message
                ),
            )
            .with_hint("Set [passthrough] mode = \"all\" to send INSERT, UPDATE, DELETE and MERGE to PostgreSQL."));
        }
        Class::Ddl => {
            return Err(SqlError::new("0A000", format!("DDL is not passed through to PostgreSQL ({})", err.message))
                .with_hint("Run DDL for PostgreSQL's tables on PostgreSQL directly."));
        }
        Class::Other => {
            return Err(
                err.with_hint("Only SELECT, INSERT, UPDATE, DELETE and MERGE are passed through to PostgreSQL.")
            );
        }
    }
    let sql = ast.to_string();
    if let Some(name) = held_name(&sql, held) {
        return Err(SqlError::new(
            "0A000",
            format!("statement mixes table \"{name}\", which pgtier holds, with a table it does not ({})", err.message),
        )
        .with_hint("A statement is passed through to PostgreSQL only when it names no table pgtier holds."));
    }
    Ok(Remote { sql, described: std::sync::OnceLock::new() })
}

/// The first identifier in `sql` that names a table pgtier holds.
/// Deliberately coarse (any identifier, also a column or alias of that
/// name): a false match refuses a passthrough, it never sends a statement
/// on a cached table to PostgreSQL.
fn held_name(sql: &str, held: impl Fn(&str) -> bool) -> Option<String> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql).tokenize().unwrap_or_default();
    tokens.into_iter().find_map(|t| match t {
        Token::Word(w) => {
            let name = if w.quote_style.is_some() { w.value } else { w.value.to_lowercase() };
            held(&name).then_some(name)
        }
        _ => None,
    })
}

/// DROP TABLE and CREATE INDEX on a table pgtier does not hold fail when
/// they run, not when they bind (queries and DML fail at bind, so an
/// unknown table at run time means DDL): with passthrough on, say plainly
/// that the statement was not sent to PostgreSQL either.
pub fn refuse_ddl(e: SqlError) -> SqlError {
    if e.sqlstate == "42P01" && (e.message.starts_with("table \"") || e.message.starts_with("relation \"")) {
        return SqlError::new("0A000", format!("DDL is not passed through to PostgreSQL ({})", e.message))
            .with_hint("Run DDL for PostgreSQL's tables on PostgreSQL directly.");
    }
    e
}

impl Remote {
    pub fn is_described(&self) -> bool {
        self.described.get().is_some()
    }

    /// Parse: learns parameter and result types from PostgreSQL.
    pub fn describe_on(&self, lease: &mut Lease, declared: &[u32]) -> Result<(), SqlError> {
        if self.is_described() {
            return Ok(());
        }
        let d = lease.run(|c| c.describe(&self.sql, declared))?;
        let _ = self.described.set(d);
        Ok(())
    }

    fn described(&self) -> Result<&Described, SqlError> {
        self.described.get().ok_or_else(|| {
            SqlError::unsupported("EXECUTE of a prepared statement that is passed through to PostgreSQL")
        })
    }

    pub fn param_oids(&self) -> Vec<u32> {
        self.described.get().map(|d| d.param_oids.clone()).unwrap_or_default()
    }

    /// RowDescription (with the portal's formats) or NoData.
    pub fn describe_rows(&self, wire: &mut Wire, formats: &[i16]) {
        match self.described.get().and_then(|d| d.fields.as_ref()) {
            None => wire.no_data(),
            Some(fields) => {
                let fields = fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        let format = formats.get(i).copied().unwrap_or(0);
                        FieldDescription::new(
                            f.name.clone(),
                            f.table_oid,
                            f.column,
                            f.type_oid,
                            f.size,
                            f.modifier,
                            format,
                        )
                    })
                    .collect();
                wire.send(PgWireBackendMessage::RowDescription(RowDescription::new(fields)));
            }
        }
    }

    /// Bind: keeps the parameters as sent (PostgreSQL decodes them) and
    /// returns the number of result columns.
    pub fn bind(
        &self,
        raw: &mut RawParams,
        params: &[Option<Bytes>],
        formats: &[i16],
        name: &str,
    ) -> Result<usize, SqlError> {
        let d = self.described()?;
        let needed = d.param_oids.len();
        if params.len() != needed {
            return Err(SqlError::new(
                "08P01",
                format!(
                    "bind message supplies {} parameters, but prepared statement \"{name}\" requires {needed}",
                    params.len()
                ),
            ));
        }
        raw.values.clear();
        raw.values.extend_from_slice(params);
        raw.formats.clear();
        raw.formats.extend_from_slice(formats);
        Ok(d.fields.as_ref().map_or(0, Vec::len))
    }

    /// Simple query: PostgreSQL's RowDescription, DataRows and
    /// CommandComplete go to `out` as they are.
    pub fn run_simple(&self, lease: &mut Lease, out: &mut BytesMut) -> Result<(), SqlError> {
        lease.run(|c| c.simple(&self.sql, out))
    }

    /// Execute: the rows (DataRow messages, verbatim, ends in `ends`) and
    /// the command tag; notices go to `notices`.
    pub fn run_extended(
        &self,
        lease: &mut Lease,
        raw: &RawParams,
        result_formats: &[i16],
        notices: &mut BytesMut,
    ) -> Result<Fetched, SqlError> {
        let d = self.described()?;
        lease.run(|c| c.execute(&self.sql, &d.param_oids, raw, result_formats, notices))
    }
}

// ------------------------------------------------------------ pool

pub struct Pool {
    pub mode: PassthroughMode,
    /// `[passthrough] non_superusers` (see `Rule`).
    pub non_superusers: bool,
    config: postgres::Config,
    /// The backend URL without its password, for messages.
    shown: String,
    /// Where the password comes from, for the hint after a failed login.
    password_source: Option<String>,
    /// None: `sslmode = disable`.
    tls: Option<BackendTls>,
    size: usize,
    state: Mutex<PoolState>,
    freed: Condvar,
}

struct PoolState {
    idle: Vec<Conn>,
    /// Connections in existence (idle + leased + being opened).
    open: usize,
}

impl Pool {
    /// No connection is opened here: PostgreSQL being down must not stop
    /// pgtier from serving its own tables.
    pub fn new(
        mode: PassthroughMode,
        non_superusers: bool,
        params: pgtier_backend::ConnectParams,
        tls: Option<BackendTls>,
    ) -> Pool {
        Pool {
            mode,
            non_superusers,
            config: params.config,
            shown: params.shown,
            password_source: params.password_source,
            tls,
            size: params.pool_size,
            state: Mutex::new(PoolState { idle: Vec::new(), open: 0 }),
            freed: Condvar::new(),
        }
    }

    /// A connection for one statement (it commits on PostgreSQL by itself).
    pub fn lease(self: &Arc<Self>) -> Result<Lease, SqlError> {
        // Waiting for a connection, or connecting: not with an event loop.
        crate::event_loop::before_wait();
        let deadline = Instant::now() + POOL_WAIT;
        let mut st = self.state.lock();
        loop {
            if let Some(conn) = st.idle.pop() {
                return Ok(Lease { pool: Arc::clone(self), conn: Some(conn) });
            }
            if st.open < self.size {
                st.open += 1;
                drop(st);
                return match Conn::open(&self.config, self.tls.as_ref(), self.mode) {
                    Ok(conn) => Ok(Lease { pool: Arc::clone(self), conn: Some(conn) }),
                    Err(e) => {
                        self.release(None);
                        Err(self.connect_error(e))
                    }
                };
            }
            if self.freed.wait_until(&mut st, deadline).timed_out() {
                return Err(SqlError::new(
                    "53300",
                    format!(
                        "passthrough: all {} connections to PostgreSQL are busy (waited {} s)",
                        self.size,
                        POOL_WAIT.as_secs()
                    ),
                )
                .with_hint("Raise [backend] pool_size."));
            }
        }
    }

    /// 08001 for the client (its statement could not reach PostgreSQL),
    /// with PostgreSQL's own SQLSTATE and message when it refused the login.
    fn connect_error(&self, e: OpenError) -> SqlError {
        match e {
            OpenError::Io(e) => {
                SqlError::new("08001", format!("passthrough: cannot connect to PostgreSQL at {}: {e}", self.shown))
            }
            OpenError::Refused(pg) => {
                let err = SqlError::new(
                    "08001",
                    format!(
                        "passthrough: PostgreSQL at {} refused pgtier's connection: {} (SQLSTATE {})",
                        self.shown, pg.message, pg.sqlstate
                    ),
                );
                match (&self.password_source, pg.sqlstate.starts_with("28")) {
                    (Some(source), true) => err.with_hint(format!(
                        "pgtier logs in with the password from {source}; check it against the role in PostgreSQL."
                    )),
                    (None, true) => {
                        err.with_hint("Set [backend] password_file or password_env if PostgreSQL asks for a password.")
                    }
                    _ => err,
                }
            }
        }
    }

    fn release(&self, conn: Option<Conn>) {
        let mut st = self.state.lock();
        match conn {
            Some(c) => st.idle.push(c),
            None => st.open -= 1,
        }
        self.freed.notify_one();
    }
}

/// A pooled connection, returned to the pool when dropped (or closed, if
/// it broke).
pub struct Lease {
    pool: Arc<Pool>,
    conn: Option<Conn>,
}

impl Lease {
    /// Runs one exchange; a connection that failed mid-exchange (or is
    /// out of step) is dropped and the error becomes 08006.
    fn run<T>(&mut self, f: impl FnOnce(&mut Conn) -> Result<Result<T, SqlError>, io::Error>) -> Result<T, SqlError> {
        // A backend round trip may wait on PostgreSQL's locks, held perhaps
        // by another session of the same event loop.
        crate::event_loop::before_wait();
        let Some(conn) = self.conn.as_mut() else {
            return Err(SqlError::new("08006", "passthrough: no connection"));
        };
        match f(conn) {
            Ok(r) => r,
            Err(e) => {
                self.conn = None;
                Err(SqlError::new(
                    "08006",
                    format!("passthrough: connection to PostgreSQL at {} lost: {e}", self.pool.shown),
                ))
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.pool.release(self.conn.take());
    }
}

/// A connection pinned to one pgtier transaction block, with a transaction
/// open on it (see the module comment). Dropped without [`BlockLease::commit`]
/// or [`BlockLease::rollback`] (the client went away), it rolls back.
pub struct BlockLease {
    lease: Lease,
    open: bool,
}

impl BlockLease {
    /// Leases a connection and opens a transaction on it.
    pub fn begin(pool: &Arc<Pool>) -> Result<BlockLease, SqlError> {
        let mut lease = pool.lease()?;
        let mut answer = BytesMut::new();
        lease.run(|c| c.simple("BEGIN", &mut answer))?;
        Ok(BlockLease { lease, open: true })
    }

    pub fn lease(&mut self) -> &mut Lease {
        &mut self.lease
    }

    /// Commits PostgreSQL's part. An error (a deferred constraint, a
    /// serialization failure, the connection lost) means it was rolled back.
    pub fn commit(mut self) -> Result<(), SqlError> {
        self.open = false;
        let mut notices = BytesMut::new();
        let (_, _, tag) = self.lease.run(|c| c.execute("COMMIT", &[], &RawParams::default(), &[], &mut notices))?;
        // PostgreSQL answers COMMIT of a transaction it had already aborted
        // with the tag ROLLBACK, not an error.
        if tag == "COMMIT" {
            Ok(())
        } else {
            Err(SqlError::new("40000", "passthrough: PostgreSQL rolled back its part of the transaction"))
        }
    }

    pub fn rollback(mut self) {
        self.finish_rollback();
    }

    fn finish_rollback(&mut self) {
        if std::mem::take(&mut self.open) {
            let mut answer = BytesMut::new();
            // A failure drops the connection (Lease::run), which ends
            // PostgreSQL's transaction too.
            let _ = self.lease.run(|c| c.simple("ROLLBACK", &mut answer));
        }
    }
}

impl Drop for BlockLease {
    fn drop(&mut self) {
        self.finish_rollback();
    }
}

// ------------------------------------------------------------ in a session

/// Makes `conn` pass statements through: the rule for statements its binder
/// refuses, and the participant that ends a block's PostgreSQL transaction
/// with the block.
pub fn install(conn: &mut Connection, pool: &Pool) {
    let db = conn.database().clone();
    conn.set_fallback(Box::new(Rule { mode: pool.mode, non_superusers: pool.non_superusers, db }));
    conn.add_participant(Box::<BlockBackend>::default());
}

/// [`decide`] as the Connection's fallback.
struct Rule {
    mode: PassthroughMode,
    /// `[passthrough] non_superusers`: roles other than superusers may
    /// pass statements through too.
    non_superusers: bool,
    db: Database,
}

impl Fallback for Rule {
    fn adopt(
        &self,
        ast: &Statement,
        err: SqlError,
        superuser: bool,
    ) -> Result<Box<dyn std::any::Any + Send + Sync>, SqlError> {
        let catalog = self.db.catalog();
        let remote = decide(self.mode, ast, err, |n| catalog.table_by_name(n).is_some())?;
        // PostgreSQL runs a passed-through statement as the backend's
        // configured user, with its privileges: not for every role.
        if !superuser && !self.non_superusers {
            return Err(SqlError::new(
                "42501",
                "permission denied to pass a statement through to PostgreSQL: only superusers may",
            )
            .with_hint(
                "PostgreSQL runs it as pgtier's backend user. Set [passthrough] non_superusers = true to allow every role.",
            ));
        }
        Ok(Box::new(remote))
    }
}

/// The passthrough statement `s` is (see [`install`]).
pub fn remote(s: &Stmt) -> Result<&Remote, SqlError> {
    s.foreign::<Remote>().ok_or_else(|| SqlError::new("XX000", "not a passthrough statement"))
}

/// PostgreSQL's part of the session's open transaction block: the
/// connection its passthrough statements run on, with a transaction open.
#[derive(Default)]
pub struct BlockBackend {
    block: Option<BlockLease>,
}

impl CommitParticipant for BlockBackend {
    fn before_commit(&mut self) -> Result<(), SqlError> {
        match self.block.take() {
            Some(block) => block.commit(),
            None => Ok(()),
        }
    }

    fn abort(&mut self) {
        if let Some(block) = self.block.take() {
            block.rollback();
        }
    }

    /// PostgreSQL's part would not follow a ROLLBACK TO: refused once the
    /// block has one (see also `Session::backend`).
    fn savepoint(&mut self, command: &str) -> Result<(), SqlError> {
        if self.block.is_some() {
            return Err(SqlError::unsupported(format!("{command} in a transaction block with passthrough statements")));
        }
        Ok(())
    }
}

/// A backend connection a passthrough statement runs on.
pub enum Backend {
    /// Leased for this statement alone.
    Statement(Lease),
    /// The open block's, kept until the block ends.
    Block(BlockLease),
}

impl Backend {
    pub fn lease(&mut self) -> &mut Lease {
        match self {
            Backend::Statement(lease) => lease,
            Backend::Block(block) => block.lease(),
        }
    }
}

impl Session {
    /// The backend connection for a passthrough statement about to run:
    /// inside a transaction block (explicit, a multi-statement Query, or the
    /// implicit block of an extended-protocol batch) the block's own, leased
    /// with a transaction opened on its first use; otherwise one for this
    /// statement alone, which commits on PostgreSQL by itself.
    pub(crate) fn backend(&mut self) -> Result<Backend, SqlError> {
        let pool = self.remote.clone().ok_or_else(|| SqlError::new("0A000", "passthrough is off"))?;
        let in_block = self.conn.in_transaction();
        let held = self.conn.participant_mut::<BlockBackend>().and_then(|b| b.block.take());
        if !in_block {
            // The participant ends the connection with its block; one left
            // over would otherwise commit with some later block.
            if let Some(stale) = held {
                debug_assert!(false, "a block's backend connection outlived its block");
                stale.rollback();
            }
            return Ok(Backend::Statement(pool.lease()?));
        }
        match held {
            Some(block) => Ok(Backend::Block(block)),
            // PostgreSQL's part would not follow a later ROLLBACK TO.
            None if self.conn.savepoint_depth() > 0 => {
                Err(SqlError::unsupported("a passthrough statement after SAVEPOINT"))
            }
            None => Ok(Backend::Block(BlockLease::begin(&pool)?)),
        }
    }

    /// Keeps a block's backend connection for the block's next statements.
    pub(crate) fn keep_backend(&mut self, backend: Backend) {
        if let Backend::Block(block) = backend
            && let Some(participant) = self.conn.participant_mut::<BlockBackend>()
        {
            participant.block = Some(block);
        }
    }

    /// Parse of a passthrough statement: learns its parameter and result
    /// types from PostgreSQL (once).
    pub(crate) fn remote_describe(&mut self, r: &Remote, declared: &[u32]) -> Result<(), SqlError> {
        if r.is_described() {
            return Ok(());
        }
        // Inside a block on the block's own connection: a second lease
        // could wait forever on a pool the open blocks hold.
        let mut backend = self.backend()?;
        let described = r.describe_on(backend.lease(), declared);
        self.keep_backend(backend);
        described
    }
}

// ------------------------------------------------------------ connection

enum Sock {
    Tcp(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    Unix(UnixStream),
}

/// Why a backend connection could not be opened.
enum OpenError {
    Io(io::Error),
    /// PostgreSQL's ErrorResponse during startup (a failed login, a
    /// missing database, too many connections).
    Refused(Box<SqlError>),
}

impl From<io::Error> for OpenError {
    fn from(e: io::Error) -> OpenError {
        OpenError::Io(e)
    }
}

struct Conn {
    sock: Sock,
    rbuf: BytesMut,
    wbuf: BytesMut,
}

/// The first of `host`'s addresses that accepts, as libpq tries them
/// ("localhost" may resolve to ::1 first while PostgreSQL listens on
/// 127.0.0.1 only).
fn connect_tcp(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| bad(format!("host {host} has no address"))))
}

fn bad(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.into())
}

impl Conn {
    fn open(config: &postgres::Config, tls: Option<&BackendTls>, mode: PassthroughMode) -> Result<Conn, OpenError> {
        let timeout = config.get_connect_timeout().copied().unwrap_or(CONNECT_TIMEOUT);
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let sock = match config.get_hosts().first() {
            Some(Host::Tcp(h)) => {
                let s = connect_tcp(h, port, timeout)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(timeout))?;
                match tls {
                    None => Sock::Tcp(s),
                    Some(tls) => match tls.negotiate(s, h)? {
                        Negotiated::Plain(s) => Sock::Tcp(s),
                        Negotiated::Tls(s) => Sock::Tls(s),
                    },
                }
            }
            // As libpq: TLS is never used over a Unix socket.
            Some(Host::Unix(dir)) => {
                let s = UnixStream::connect(dir.join(format!(".s.PGSQL.{port}")))?;
                s.set_read_timeout(Some(timeout))?;
                Sock::Unix(s)
            }
            None => return Err(bad("the URL names no host").into()),
        };
        let mut conn = Conn { sock, rbuf: BytesMut::with_capacity(8192), wbuf: BytesMut::new() };
        conn.startup(config, mode)?;
        // Statements may run long; only connecting is bounded.
        match &conn.sock {
            Sock::Tcp(s) => s.set_read_timeout(None)?,
            Sock::Tls(s) => s.sock.set_read_timeout(None)?,
            Sock::Unix(s) => s.set_read_timeout(None)?,
        }
        Ok(conn)
    }

    fn startup(&mut self, config: &postgres::Config, mode: PassthroughMode) -> Result<(), OpenError> {
        let user = config.get_user().unwrap_or("postgres");
        let db = config.get_dbname().unwrap_or(user);
        // Text results must look like pgtier's own (its defaults); in
        // "reads" mode PostgreSQL itself refuses any write that slipped
        // past the classification (a volatile function, a CTE).
        let options = if mode == PassthroughMode::Reads { "-c default_transaction_read_only=on" } else { "" };
        let params = [
            ("user", user),
            ("database", db),
            ("application_name", "pgtier-passthrough"),
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO, MDY"),
            ("IntervalStyle", "postgres"),
            ("TimeZone", "UTC"),
            ("extra_float_digits", "1"),
            ("options", options),
        ];
        frontend::startup_message(params.iter().copied().filter(|(_, v)| !v.is_empty()), &mut self.wbuf)?;
        self.send()?;
        let password = config.get_password().unwrap_or_default().to_vec();
        let mut scram: Option<ScramSha256> = None;
        loop {
            let (tag, mut body) = self.read()?;
            match tag {
                b'R' => match body.get_i32() {
                    0 => {}
                    3 => {
                        frontend::password_message(&password, &mut self.wbuf)?;
                        self.send()?;
                    }
                    5 => {
                        let mut salt = [0u8; 4];
                        body.copy_to_slice(&mut salt);
                        let hash = postgres_protocol::authentication::md5_hash(user.as_bytes(), &password, salt);
                        frontend::password_message(hash.as_bytes(), &mut self.wbuf)?;
                        self.send()?;
                    }
                    10 => {
                        let offered = body.split(|b| *b == 0).any(|m| m == SCRAM_SHA_256.as_bytes());
                        if !offered {
                            return Err(bad("PostgreSQL offers no SASL mechanism pgtier supports").into());
                        }
                        let s = ScramSha256::new(&password, ChannelBinding::unsupported());
                        frontend::sasl_initial_response(SCRAM_SHA_256, s.message(), &mut self.wbuf)?;
                        self.send()?;
                        scram = Some(s);
                    }
                    11 => {
                        let s = scram.as_mut().ok_or_else(|| bad("unexpected SASLContinue"))?;
                        s.update(&body)?;
                        frontend::sasl_response(s.message(), &mut self.wbuf)?;
                        self.send()?;
                    }
                    12 => {
                        scram.as_mut().ok_or_else(|| bad("unexpected SASLFinal"))?.finish(&body)?;
                    }
                    n => return Err(bad(format!("unsupported authentication request {n}")).into()),
                },
                b'E' => return Err(OpenError::Refused(Box::new(error_fields(&body)))),
                b'Z' => return Ok(()),
                // ParameterStatus, BackendKeyData, NoticeResponse.
                _ => {}
            }
        }
    }

    fn send(&mut self) -> io::Result<()> {
        let r = match &mut self.sock {
            Sock::Tcp(s) => s.write_all(&self.wbuf),
            // rustls buffers; flush sends the records.
            Sock::Tls(s) => s.write_all(&self.wbuf).and_then(|()| s.flush()),
            Sock::Unix(s) => s.write_all(&self.wbuf),
        };
        self.wbuf.clear();
        r
    }

    /// One backend message: its tag and body.
    fn read(&mut self) -> io::Result<(u8, Bytes)> {
        loop {
            if self.rbuf.len() >= 5 {
                let len = u32::from_be_bytes([self.rbuf[1], self.rbuf[2], self.rbuf[3], self.rbuf[4]]) as usize;
                if !(4..=MAX_BACKEND_MESSAGE).contains(&len) {
                    return Err(bad(format!("backend message of {len} bytes")));
                }
                if self.rbuf.len() > len {
                    let mut msg = self.rbuf.split_to(len + 1).freeze();
                    let tag = msg.get_u8();
                    msg.advance(4);
                    return Ok((tag, msg));
                }
                self.rbuf.reserve(len + 1 - self.rbuf.len());
            }
            let mut chunk = [0u8; 8192];
            let n = match &mut self.sock {
                Sock::Tcp(s) => s.read(&mut chunk)?,
                Sock::Tls(s) => s.read(&mut chunk)?,
                Sock::Unix(s) => s.read(&mut chunk)?,
            };
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection"));
            }
            self.rbuf.extend_from_slice(&chunk[..n]);
        }
    }

    fn simple(&mut self, sql: &str, out: &mut BytesMut) -> io::Result<Result<(), SqlError>> {
        frontend::query(sql, &mut self.wbuf)?;
        self.send()?;
        let mut error = None;
        loop {
            let (tag, body) = self.read()?;
            match tag {
                b'T' | b'D' | b'C' | b'I' | b'N' => put_message(out, tag, &body),
                b'E' => error = Some(error_fields(&body)),
                b'Z' => return Ok(error.map_or(Ok(()), Err)),
                // COPY started by a function: refuse it, PostgreSQL then errors.
                b'G' => {
                    frontend::copy_fail("COPY is not passed through by pgtier", &mut self.wbuf)?;
                    self.send()?;
                }
                b'H' => return Err(bad("COPY TO STDOUT through passthrough")),
                _ => {}
            }
        }
    }

    fn describe(&mut self, sql: &str, declared: &[u32]) -> io::Result<Result<Described, SqlError>> {
        frontend::parse("", sql, declared.iter().copied(), &mut self.wbuf)?;
        frontend::describe(b'S', "", &mut self.wbuf)?;
        frontend::sync(&mut self.wbuf);
        self.send()?;
        let mut error = None;
        let mut d = Described { param_oids: Vec::new(), fields: None };
        loop {
            let (tag, mut body) = self.read()?;
            match tag {
                b't' => {
                    let n = body.get_i16();
                    d.param_oids = (0..n).map(|_| body.get_u32()).collect();
                }
                b'T' => d.fields = Some(parse_fields(body)?),
                b'E' => error = Some(error_fields(&body)),
                b'Z' => return Ok(error.map_or(Ok(d), Err)),
                _ => {}
            }
        }
    }

    fn execute(
        &mut self,
        sql: &str,
        oids: &[u32],
        raw: &RawParams,
        result_formats: &[i16],
        notices: &mut BytesMut,
    ) -> io::Result<Result<Fetched, SqlError>> {
        frontend::parse("", sql, oids.iter().copied(), &mut self.wbuf)?;
        put_bind(&mut self.wbuf, raw, result_formats)?;
        frontend::execute("", 0, &mut self.wbuf)?;
        frontend::sync(&mut self.wbuf);
        self.send()?;
        let (mut rows, mut ends, mut tag, mut error) = (BytesMut::new(), Vec::new(), String::new(), None);
        loop {
            let (t, body) = self.read()?;
            match t {
                b'D' => {
                    put_message(&mut rows, t, &body);
                    ends.push(rows.len());
                }
                b'C' => tag = String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(&body)).into_owned(),
                b'N' => put_message(notices, t, &body),
                b'E' => error = Some(error_fields(&body)),
                b'Z' => return Ok(error.map_or(Ok((rows, ends, tag)), Err)),
                _ => {}
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        frontend::terminate(&mut self.wbuf);
        let _ = self.send();
        if let Sock::Tls(s) = &mut self.sock {
            s.conn.send_close_notify();
            let _ = s.flush();
        }
    }
}

fn put_message(out: &mut BytesMut, tag: u8, body: &[u8]) {
    out.put_u8(tag);
    out.put_u32(u32::try_from(body.len() + 4).unwrap_or(u32::MAX));
    out.put_slice(body);
}

/// Bind of the unnamed portal to the unnamed statement, parameters as the
/// client sent them.
fn put_bind(out: &mut BytesMut, raw: &RawParams, result_formats: &[i16]) -> io::Result<()> {
    let too_many = || bad("too many parameters");
    out.put_u8(b'B');
    let at = out.len();
    out.put_u32(0);
    out.put_slice(b"\0\0");
    out.put_i16(i16::try_from(raw.formats.len()).map_err(|_| too_many())?);
    for f in &raw.formats {
        out.put_i16(*f);
    }
    out.put_i16(i16::try_from(raw.values.len()).map_err(|_| too_many())?);
    for v in &raw.values {
        match v {
            None => out.put_i32(-1),
            Some(b) => {
                out.put_i32(i32::try_from(b.len()).map_err(|_| bad("parameter too large"))?);
                out.put_slice(b);
            }
        }
    }
    out.put_i16(i16::try_from(result_formats.len()).map_err(|_| too_many())?);
    for f in result_formats {
        out.put_i16(*f);
    }
    let len = u32::try_from(out.len() - at).map_err(|_| bad("bind too large"))?;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

fn cstr(body: &mut Bytes) -> io::Result<String> {
    let end = body.iter().position(|b| *b == 0).ok_or_else(|| bad("unterminated string"))?;
    let s = String::from_utf8_lossy(&body[..end]).into_owned();
    body.advance(end + 1);
    Ok(s)
}

fn parse_fields(mut body: Bytes) -> io::Result<Vec<Field>> {
    let n = body.get_i16();
    let mut fields = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for _ in 0..n {
        let name = cstr(&mut body)?;
        if body.remaining() < 18 {
            return Err(bad("short RowDescription"));
        }
        let (table_oid, column, type_oid, size, modifier) =
            (body.get_i32(), body.get_i16(), body.get_u32(), body.get_i16(), body.get_i32());
        body.advance(2);
        fields.push(Field { name, table_oid, column, type_oid, size, modifier });
    }
    Ok(fields)
}

/// PostgreSQL's ErrorResponse as an SqlError: SQLSTATE, message, detail,
/// hint and constraint kept.
fn error_fields(body: &[u8]) -> SqlError {
    let mut e = SqlError::new("XX000", "");
    for field in body.split(|b| *b == 0) {
        let Some((&kind, value)) = field.split_first() else { continue };
        let value = String::from_utf8_lossy(value).into_owned();
        match kind {
            b'C' => e.sqlstate = intern_sqlstate(&value),
            b'M' => e.message = value,
            b'D' => e.detail = Some(value),
            b'H' => e.hint = Some(value),
            b'n' => e.constraint = Some(value),
            _ => {}
        }
    }
    e
}

/// SqlError carries `&'static str` SQLSTATEs; PostgreSQL's arrive as text.
/// Each distinct well-formed code is leaked once (a bounded set: five
/// characters of [0-9A-Z], and in practice the ~250 PostgreSQL defines).
fn intern_sqlstate(code: &str) -> &'static str {
    static CODES: OnceLock<std::sync::Mutex<HashSet<&'static str>>> = OnceLock::new();
    if code.len() != 5 || !code.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) {
        return "XX000";
    }
    let mut set = match CODES.get_or_init(Default::default).lock() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    if let Some(c) = set.get(code) {
        return c;
    }
    let leaked: &'static str = Box::leak(code.to_owned().into_boxed_str());
    set.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ast(sql: &str) -> Statement {
        sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, sql).unwrap().pop().unwrap()
    }

    #[test]
    fn classes() {
        assert_eq!(classify(&ast("SELECT * FROM t")), Class::Read);
        assert_eq!(classify(&ast("SELECT * FROM t FOR UPDATE")), Class::Write);
        assert_eq!(classify(&ast("WITH s AS (SELECT 1) SELECT * FROM s")), Class::Read);
        assert_eq!(classify(&ast("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d")), Class::Write);
        assert_eq!(classify(&ast("WITH i AS (INSERT INTO t VALUES (1)) SELECT 1")), Class::Write);
        assert_eq!(classify(&ast("SELECT * INTO x FROM t")), Class::Ddl);
        assert_eq!(classify(&ast("INSERT INTO t VALUES (1)")), Class::Write);
        assert_eq!(classify(&ast("DELETE FROM t")), Class::Write);
        assert_eq!(classify(&ast("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE")), Class::Write);
        assert_eq!(classify(&ast("DROP TABLE t")), Class::Ddl);
        assert_eq!(classify(&ast("ALTER TABLE t ADD COLUMN c int")), Class::Ddl);
        assert_eq!(classify(&ast("TRUNCATE t")), Class::Ddl);
        assert_eq!(classify(&ast("CREATE INDEX i ON t (a)")), Class::Ddl);
    }

    #[test]
    fn held_names_are_found_quoted_or_folded() {
        let held = |n: &str| n == "local";
        assert_eq!(held_name("SELECT * FROM remote JOIN LOCAL ON true", held), Some("local".to_owned()));
        assert_eq!(held_name("SELECT * FROM \"Local\"", held), None);
        assert_eq!(held_name("SELECT 'local' FROM remote", held), None);
    }

    #[test]
    fn sqlstates_intern() {
        assert_eq!(intern_sqlstate("23505"), "23505");
        assert_eq!(intern_sqlstate("bad"), "XX000");
    }
}
