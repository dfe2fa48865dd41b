//! A minimal blocking PostgreSQL protocol client for the measurement hot path.
//!
//! Why not the `postgres` crate here: its sync client drives a Tokio runtime
//! per connection, so every round trip costs an extra `epoll_wait`, a channel
//! hand-off and a future poll cycle — about 10 µs of client CPU per
//! transaction more than pgbench/libpq. With 16 clients on 2 cores that CPU is
//! taken from the server being measured, and later, against a cache that
//! answers in tens of µs, it would be a large share of the latency itself.
//! This client sends each request with one `write` and reads the answer with
//! blocking `read`s: 2 system calls per round trip.
//!
//! It speaks exactly what [`Session`] needs, with the same messages libpq
//! sends for a prepared statement: Parse/Describe once; then Bind (binary
//! parameters and results), Execute, Sync per call; simple Query for
//! COMMIT/ROLLBACK. BEGIN is sent as pgJDBC sends it with autocommit off: not
//! on its own, but as Bind/Execute of a prepared BEGIN in the same write as
//! the transaction's first statement (before that statement's Bind, with one
//! Sync for both), which saves a round trip per transaction block. Should
//! BEGIN fail, the server skips the statement up to the Sync and its error is
//! the statement's. Authentication: trust, cleartext, MD5, SCRAM-SHA-256.
//! No TLS (the benchmark talks to a server on the same host or LAN).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use postgres::config::Host;
use postgres::fallible_iterator::FallibleIterator;
use postgres_protocol::IsNull;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::backend::{ErrorResponseBody, Message};
use postgres_protocol::message::frontend;

use crate::target::{DbError, SIMPLE_QUERY_ROWS_MAX, Session, StatementId, TextRow, Value, too_many_rows};

/// Statements one session may prepare (bounds the name table).
const STATEMENTS_PER_SESSION_MAX: usize = 256;
/// Reads happen in pieces of this size; TATP answers fit in one.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Used when the URL sets no connect_timeout (as libpq would wait forever).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

// Type OIDs this client converts (pg_type.h).
const INT8_OID: u32 = 20;
const INT2_OID: u32 = 21;
const INT4_OID: u32 = 23;
const TEXT_OID: u32 = 25;
const NAME_OID: u32 = 19;
const BPCHAR_OID: u32 = 1042;
const VARCHAR_OID: u32 = 1043;
const UNKNOWN_OID: u32 = 705;

fn is_text_oid(oid: u32) -> bool {
    matches!(oid, TEXT_OID | VARCHAR_OID | BPCHAR_OID | NAME_OID | UNKNOWN_OID)
}

/// Integers and text travel in binary; every other type (numeric,
/// timestamp, date: TPC-C's money and dates) in its text form, which the
/// server's input and output functions read and print exactly, so the
/// workload never converts a decimal through a float.
fn wire_format(oid: u32) -> i16 {
    if matches!(oid, INT2_OID | INT4_OID | INT8_OID) || is_text_oid(oid) { 1 } else { 0 }
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(buf),
            Stream::Unix(s) => s.write_all(buf),
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

struct Prepared {
    name: String,
    param_oids: Vec<u32>,
    column_oids: Vec<u32>,
    /// [`wire_format`] of each parameter and result column.
    param_formats: Vec<i16>,
    column_formats: Vec<i16>,
}

/// One connection speaking the PostgreSQL protocol directly.
pub struct WireSession {
    stream: Stream,
    read_buf: BytesMut,
    /// What each read lands in, zeroed once per session: a fresh zeroed
    /// array per read cost a 16 KiB memset per round trip.
    chunk: Box<[u8]>,
    write_buf: BytesMut,
    statements: Vec<Prepared>,
    /// The prepared `BEGIN`, once a transaction block was first asked for.
    begin_stmt: Option<StatementId>,
    /// `begin` was called and BEGIN not sent yet: it goes out with the next
    /// request.
    begin_pending: bool,
    /// The connection is unusable (I/O failure or protocol confusion).
    broken: bool,
}

fn io_error(what: &str, e: &std::io::Error) -> DbError {
    // 08006: connection_failure, as libpq reports a lost connection.
    DbError::new(Some("08006"), format!("{what}: {e}"))
}

fn server_error(body: &ErrorResponseBody) -> DbError {
    let mut code = None;
    let mut message = String::new();
    let mut detail = None;
    let mut fields = body.fields();
    while let Ok(Some(f)) = fields.next() {
        match f.type_() {
            b'C' => code = Some(String::from_utf8_lossy(f.value_bytes()).into_owned()),
            b'M' => message = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            b'D' => detail = Some(String::from_utf8_lossy(f.value_bytes()).into_owned()),
            _ => {}
        }
    }
    if let Some(d) = detail {
        message.push_str(": ");
        message.push_str(&d);
    }
    DbError { sqlstate: code, message }
}

fn protocol_error(what: impl std::fmt::Display) -> DbError {
    // 08P01: protocol_violation.
    DbError::new(Some("08P01"), format!("unexpected server message: {what}"))
}

/// Rows affected from a command tag ("UPDATE 3", "INSERT 0 1", "SELECT 5").
fn tag_rows(tag: &str) -> u64 {
    tag.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

impl WireSession {
    /// Connects and authenticates as the URL says.
    pub fn connect(url: &str) -> Result<WireSession, DbError> {
        let config: postgres::Config =
            url.parse().map_err(|e: postgres::Error| DbError::new(None, format!("invalid URL: {e}")))?;
        let stream = open_stream(&config)?;
        let mut session = WireSession {
            stream,
            read_buf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            chunk: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
            write_buf: BytesMut::with_capacity(1024),
            statements: Vec::new(),
            begin_stmt: None,
            begin_pending: false,
            broken: false,
        };
        session.startup(&config)?;
        Ok(session)
    }

    fn startup(&mut self, config: &postgres::Config) -> Result<(), DbError> {
        let user = config.get_user().ok_or_else(|| DbError::new(None, "the URL names no user"))?;
        let database = config.get_dbname().unwrap_or(user);
        let mut params = vec![("user", user), ("database", database), ("client_encoding", "UTF8")];
        params.push(("application_name", config.get_application_name().unwrap_or("pgtier-bench")));
        self.write_buf.clear();
        frontend::startup_message(params.iter().copied(), &mut self.write_buf)
            .map_err(|e| io_error("encoding startup", &e))?;
        self.flush()?;
        let password = config.get_password();
        let mut scram: Option<ScramSha256> = None;
        let no_password = || DbError::new(Some("28P01"), "the server asks for a password and the URL has none");
        loop {
            match self.next_message()? {
                Message::AuthenticationOk | Message::ParameterStatus(_) | Message::BackendKeyData(_) => {}
                Message::AuthenticationCleartextPassword => {
                    let pw = password.ok_or_else(no_password)?;
                    frontend::password_message(pw, &mut self.write_buf).map_err(|e| io_error("auth", &e))?;
                    self.flush()?;
                }
                Message::AuthenticationMd5Password(body) => {
                    let pw = password.ok_or_else(no_password)?;
                    let hash = md5_hash(user.as_bytes(), pw, body.salt());
                    frontend::password_message(hash.as_bytes(), &mut self.write_buf)
                        .map_err(|e| io_error("auth", &e))?;
                    self.flush()?;
                }
                Message::AuthenticationSasl(body) => {
                    let pw = password.ok_or_else(no_password)?;
                    let mut mechanisms = body.mechanisms();
                    let mut has_scram = false;
                    while let Ok(Some(m)) = mechanisms.next() {
                        has_scram |= m == SCRAM_SHA_256;
                    }
                    if !has_scram {
                        return Err(DbError::new(None, "the server offers no supported SASL mechanism"));
                    }
                    let s = ScramSha256::new(pw, ChannelBinding::unsupported());
                    frontend::sasl_initial_response(SCRAM_SHA_256, s.message(), &mut self.write_buf)
                        .map_err(|e| io_error("auth", &e))?;
                    scram = Some(s);
                    self.flush()?;
                }
                Message::AuthenticationSaslContinue(body) => {
                    let s = scram.as_mut().ok_or_else(|| protocol_error("SASL continue without SASL"))?;
                    s.update(body.data()).map_err(|e| DbError::new(Some("28P01"), format!("SCRAM: {e}")))?;
                    frontend::sasl_response(s.message(), &mut self.write_buf).map_err(|e| io_error("auth", &e))?;
                    self.flush()?;
                }
                Message::AuthenticationSaslFinal(body) => {
                    let s = scram.as_mut().ok_or_else(|| protocol_error("SASL final without SASL"))?;
                    s.finish(body.data()).map_err(|e| DbError::new(Some("28P01"), format!("SCRAM: {e}")))?;
                }
                Message::ErrorResponse(body) => return Err(server_error(&body)),
                Message::NoticeResponse(_) => {}
                Message::ReadyForQuery(_) => return Ok(()),
                _ => return Err(protocol_error("during startup")),
            }
        }
    }

    /// Sends the write buffer (one system call for a whole request).
    fn flush(&mut self) -> Result<(), DbError> {
        let result = self.stream.write_all(&self.write_buf);
        self.write_buf.clear();
        result.map_err(|e| {
            self.broken = true;
            io_error("sending to the server", &e)
        })
    }

    fn next_message(&mut self) -> Result<Message, DbError> {
        loop {
            match Message::parse(&mut self.read_buf) {
                Ok(Some(m)) => return Ok(m),
                Ok(None) => {}
                Err(e) => {
                    self.broken = true;
                    return Err(protocol_error(e));
                }
            }
            match self.stream.read(&mut self.chunk) {
                Ok(0) => {
                    self.broken = true;
                    return Err(DbError::new(Some("08006"), "the server closed the connection"));
                }
                Ok(n) => self.read_buf.extend_from_slice(&self.chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.broken = true;
                    return Err(io_error("reading from the server", &e));
                }
            }
        }
    }

    fn check_usable(&self) -> Result<(), DbError> {
        if self.broken { Err(DbError::new(Some("08006"), "the connection was lost earlier")) } else { Ok(()) }
    }

    /// Reads up to ReadyForQuery, which ends every request; the first error
    /// seen is returned after the connection is back in sync.
    fn until_ready(&mut self, mut on: impl FnMut(Message) -> Result<(), DbError>) -> Result<(), DbError> {
        let mut first_error = None;
        loop {
            match self.next_message()? {
                Message::ReadyForQuery(_) => break,
                Message::ErrorResponse(body) => {
                    first_error.get_or_insert_with(|| server_error(&body));
                }
                Message::NoticeResponse(_) | Message::ParameterStatus(_) | Message::NotificationResponse(_) => {}
                m => {
                    if first_error.is_none()
                        && let Err(e) = on(m)
                    {
                        first_error = Some(e);
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Puts a deferred BEGIN (Bind + Execute of the prepared one, no Sync)
    /// in front of the request about to be written: the request's own Sync
    /// ends both, and an error in BEGIN makes the server skip the request.
    fn push_pending_begin(&mut self) -> Result<(), DbError> {
        if !std::mem::take(&mut self.begin_pending) {
            return Ok(());
        }
        let stmt = self.begin_stmt.ok_or_else(|| DbError::new(None, "BEGIN was not prepared"))?;
        let name = &self.statements[stmt].name;
        let (none, no_params) = (std::iter::empty::<i16>, std::iter::empty::<()>);
        frontend::bind("", name, none(), no_params(), |_, _| Ok(IsNull::No), none(), &mut self.write_buf)
            .map_err(|_| DbError::new(None, "encoding BEGIN"))?;
        frontend::execute("", 0, &mut self.write_buf).map_err(|e| io_error("encoding execute", &e))
    }

    fn simple(&mut self, sql: &str) -> Result<(), DbError> {
        self.check_usable()?;
        frontend::query(sql, &mut self.write_buf).map_err(|e| io_error("encoding a query", &e))?;
        self.flush()?;
        self.until_ready(|_| Ok(()))
    }

    /// Bind + Execute + Sync for a prepared statement; calls `row` for each
    /// result row and returns rows affected (or returned).
    fn run(
        &mut self,
        stmt: StatementId,
        params: &[Value],
        mut row: impl FnMut(&[u32], &postgres_protocol::message::backend::DataRowBody) -> Result<(), DbError>,
    ) -> Result<u64, DbError> {
        self.check_usable()?;
        let prepared = self
            .statements
            .get(stmt)
            .ok_or_else(|| DbError::new(None, format!("statement {stmt} was not prepared")))?;
        if params.len() != prepared.param_oids.len() {
            return Err(DbError::new(
                Some("08P01"),
                format!("{} parameters given, statement takes {}", params.len(), prepared.param_oids.len()),
            ));
        }
        let begin_was_pending = self.begin_pending;
        self.push_pending_begin()?;
        let prepared = &self.statements[stmt];
        let result = frontend::bind(
            "",
            &prepared.name,
            prepared.param_formats.iter().copied(),
            params.iter().zip(&prepared.param_oids),
            |(v, oid), buf| encode(v, *oid, buf),
            prepared.column_formats.iter().copied(),
            &mut self.write_buf,
        );
        if let Err(e) = result {
            self.write_buf.clear();
            // Nothing was sent: the block is still to be begun.
            self.begin_pending = begin_was_pending;
            let message = match e {
                frontend::BindError::Conversion(e) => e.to_string(),
                frontend::BindError::Serialization(e) => e.to_string(),
            };
            // 22003: numeric_value_out_of_range, what the server would say.
            return Err(DbError::new(Some("22003"), format!("cannot send parameter: {message}")));
        }
        frontend::execute("", 0, &mut self.write_buf).map_err(|e| io_error("encoding execute", &e))?;
        frontend::sync(&mut self.write_buf);
        self.flush()?;
        let column_oids = std::mem::take(&mut self.statements[stmt].column_oids);
        let mut rows = 0;
        let outcome = self.until_ready(|m| match m {
            Message::BindComplete | Message::EmptyQueryResponse | Message::PortalSuspended => Ok(()),
            Message::DataRow(body) => row(&column_oids, &body),
            Message::CommandComplete(body) => {
                rows = tag_rows(body.tag().map_err(protocol_error)?);
                Ok(())
            }
            _ => Err(protocol_error("in a statement's result")),
        });
        self.statements[stmt].column_oids = column_oids;
        outcome.map(|()| rows)
    }
}

fn open_stream(config: &postgres::Config) -> Result<Stream, DbError> {
    let timeout = config.get_connect_timeout().copied().unwrap_or(CONNECT_TIMEOUT);
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let hosts = config.get_hosts();
    let unreachable = |what: String| DbError::new(Some("08001"), what);
    let mut last = None;
    // Like libpq: no host means the default Unix socket directory.
    let default = [Host::Unix("/var/run/postgresql".into())];
    for host in if hosts.is_empty() { &default[..] } else { hosts } {
        match host {
            Host::Unix(dir) => {
                let path = dir.join(format!(".s.PGSQL.{port}"));
                match UnixStream::connect(&path) {
                    Ok(s) => return Ok(Stream::Unix(s)),
                    Err(e) => last = Some(format!("{}: {e}", path.display())),
                }
            }
            Host::Tcp(name) => {
                let addrs = (name.as_str(), port).to_socket_addrs().map_err(|e| unreachable(format!("{name}: {e}")))?;
                for addr in addrs {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(s) => {
                            // Requests are written whole; do not let Nagle hold them.
                            s.set_nodelay(true).map_err(|e| io_error("TCP_NODELAY", &e))?;
                            return Ok(Stream::Tcp(s));
                        }
                        Err(e) => last = Some(format!("{addr}: {e}")),
                    }
                }
            }
        }
    }
    Err(unreachable(format!("cannot reach PostgreSQL: {}", last.unwrap_or_else(|| "no host".to_owned()))))
}

/// Binary encoding by the parameter type the server inferred; text form
/// for the types [`wire_format`] sends as text.
fn encode(v: &Value, oid: u32, buf: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
    if wire_format(oid) == 0 {
        match v {
            Value::Null => return Ok(IsNull::Yes),
            Value::Int(i) => buf.put_slice(i.to_string().as_bytes()),
            Value::Text(s) => buf.put_slice(s.as_bytes()),
        }
        return Ok(IsNull::No);
    }
    match v {
        Value::Null => Ok(IsNull::Yes),
        Value::Int(i) => {
            match oid {
                INT2_OID => buf.put_i16(i16::try_from(*i)?),
                INT4_OID => buf.put_i32(i32::try_from(*i)?),
                INT8_OID => buf.put_i64(*i),
                _ => return Err(format!("cannot send an integer as type oid {oid}").into()),
            }
            Ok(IsNull::No)
        }
        Value::Text(s) if is_text_oid(oid) => {
            buf.put_slice(s.as_bytes());
            Ok(IsNull::No)
        }
        Value::Text(_) => Err(format!("cannot send text as type oid {oid}").into()),
    }
}

fn decode(oid: u32, raw: Option<&[u8]>) -> Result<Value, DbError> {
    let Some(raw) = raw else { return Ok(Value::Null) };
    let bad = || DbError::new(Some("08P01"), format!("malformed value of type oid {oid}"));
    Ok(match oid {
        INT2_OID => Value::Int(i64::from(i16::from_be_bytes(raw.try_into().map_err(|_| bad())?))),
        INT4_OID => Value::Int(i64::from(i32::from_be_bytes(raw.try_into().map_err(|_| bad())?))),
        INT8_OID => Value::Int(i64::from_be_bytes(raw.try_into().map_err(|_| bad())?)),
        // Text types in binary, and every other type in its text form
        // (wire_format): the bytes are the text either way.
        _ => Value::Text(std::str::from_utf8(raw).map_err(|_| bad())?.to_owned()),
    })
}

impl Session for WireSession {
    fn prepare(&mut self, sql: &str) -> Result<StatementId, DbError> {
        self.check_usable()?;
        if self.statements.len() >= STATEMENTS_PER_SESSION_MAX {
            return Err(DbError::new(None, format!("more than {STATEMENTS_PER_SESSION_MAX} prepared statements")));
        }
        let name = format!("pgtier_{}", self.statements.len());
        self.push_pending_begin()?;
        frontend::parse(&name, sql, std::iter::empty(), &mut self.write_buf)
            .map_err(|e| io_error("encoding parse", &e))?;
        frontend::describe(b'S', &name, &mut self.write_buf).map_err(|e| io_error("encoding describe", &e))?;
        frontend::sync(&mut self.write_buf);
        self.flush()?;
        let mut param_oids = Vec::new();
        let mut column_oids = Vec::new();
        self.until_ready(|m| match m {
            // BindComplete and CommandComplete are a deferred BEGIN's.
            Message::ParseComplete | Message::NoData | Message::BindComplete | Message::CommandComplete(_) => Ok(()),
            Message::ParameterDescription(body) => {
                param_oids = body.parameters().collect().map_err(protocol_error)?;
                Ok(())
            }
            Message::RowDescription(body) => {
                column_oids = body.fields().map(|f| Ok(f.type_oid())).collect().map_err(protocol_error)?;
                Ok(())
            }
            _ => Err(protocol_error("while preparing")),
        })?;
        let param_formats = param_oids.iter().map(|&o| wire_format(o)).collect();
        let column_formats = column_oids.iter().map(|&o| wire_format(o)).collect();
        self.statements.push(Prepared { name, param_oids, column_oids, param_formats, column_formats });
        Ok(self.statements.len() - 1)
    }

    fn query(&mut self, stmt: StatementId, params: &[Value], out: &mut Vec<Value>) -> Result<usize, DbError> {
        out.clear();
        let mut count = 0usize;
        self.run(stmt, params, |oids, body| {
            let buffer = body.buffer();
            let mut ranges = body.ranges();
            let mut i = 0;
            while let Some(range) = ranges.next().map_err(protocol_error)? {
                let oid = oids.get(i).copied().ok_or_else(|| protocol_error("more columns than described"))?;
                out.push(decode(oid, range.map(|r| &buffer[r]))?);
                i += 1;
            }
            count += 1;
            Ok(())
        })?;
        Ok(count)
    }

    fn execute(&mut self, stmt: StatementId, params: &[Value]) -> Result<u64, DbError> {
        self.run(stmt, params, |_, _| Ok(()))
    }

    fn simple_query(&mut self, sql: &str) -> Result<Vec<TextRow>, DbError> {
        self.check_usable()?;
        // A Query message cannot ride behind a deferred BEGIN's Bind (no
        // Sync between them): the block starts on its own round trip.
        if std::mem::take(&mut self.begin_pending) {
            self.simple("BEGIN")?;
        }
        frontend::query(sql, &mut self.write_buf).map_err(|e| io_error("encoding a query", &e))?;
        self.flush()?;
        let mut rows: Vec<TextRow> = Vec::new();
        self.until_ready(|m| match m {
            Message::RowDescription(_) | Message::CommandComplete(_) | Message::EmptyQueryResponse => Ok(()),
            Message::DataRow(body) => {
                if rows.len() == SIMPLE_QUERY_ROWS_MAX {
                    return Err(too_many_rows());
                }
                let buffer = body.buffer();
                let mut ranges = body.ranges();
                let mut row = Vec::new();
                while let Some(range) = ranges.next().map_err(protocol_error)? {
                    row.push(match range {
                        None => None,
                        Some(r) => Some(
                            std::str::from_utf8(&buffer[r])
                                .map_err(|_| protocol_error("a text value that is not UTF-8"))?
                                .to_owned(),
                        ),
                    });
                }
                rows.push(row);
                Ok(())
            }
            _ => Err(protocol_error("in a simple query's result")),
        })?;
        Ok(rows)
    }

    fn begin(&mut self) -> Result<(), DbError> {
        self.check_usable()?;
        if self.begin_pending {
            // As a second BEGIN inside a block: nothing new to start.
            return Ok(());
        }
        if self.begin_stmt.is_none() {
            // Once per session, the first time a block is asked for.
            self.begin_stmt = Some(self.prepare("BEGIN")?);
        }
        self.begin_pending = true;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), DbError> {
        // A block in which nothing ran was never begun on the server:
        // there is nothing to commit (pgJDBC sends nothing either).
        if std::mem::take(&mut self.begin_pending) {
            return self.check_usable();
        }
        self.simple("COMMIT")
    }

    fn rollback(&mut self) -> Result<(), DbError> {
        if std::mem::take(&mut self.begin_pending) {
            return self.check_usable();
        }
        self.simple("ROLLBACK")
    }
}

impl WireSession {
    /// Closes the socket without Terminate, as a client that crashed or
    /// lost its network would: the server finds EOF wherever the session
    /// is, an open transaction included (the soak's abrupt disconnects).
    pub fn abandon(mut self) {
        self.broken = true;
        match &self.stream {
            Stream::Tcp(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            Stream::Unix(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

impl Drop for WireSession {
    fn drop(&mut self) {
        if !self.broken {
            frontend::terminate(&mut self.write_buf);
            let _ = self.stream.write_all(&self.write_buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_tags() {
        assert_eq!(tag_rows("UPDATE 3"), 3);
        assert_eq!(tag_rows("INSERT 0 1"), 1);
        assert_eq!(tag_rows("SELECT 0"), 0);
        assert_eq!(tag_rows("BEGIN"), 0);
    }

    #[test]
    fn values_round_trip_through_the_binary_encoding() {
        for (v, oid) in [
            (Value::Int(-5), INT2_OID),
            (Value::Int(70_000), INT4_OID),
            (Value::Int(1 << 40), INT8_OID),
            (Value::Text("abc".into()), VARCHAR_OID),
        ] {
            let mut buf = BytesMut::new();
            assert!(matches!(encode(&v, oid, &mut buf), Ok(IsNull::No)));
            assert_eq!(decode(oid, Some(&buf)).ok(), Some(v));
        }
        let mut buf = BytesMut::new();
        assert!(encode(&Value::Int(70_000), INT2_OID, &mut buf).is_err(), "out of smallint range");
        assert!(encode(&Value::Text("x".into()), INT4_OID, &mut buf).is_err());
        assert_eq!(decode(INT4_OID, None).ok(), Some(Value::Null));
        assert!(decode(INT4_OID, Some(&[1, 2])).is_err());
        // numeric (1700) and timestamp (1114) go as text, both ways.
        for oid in [1700, 1114] {
            assert_eq!(wire_format(oid), 0);
            let mut buf = BytesMut::new();
            assert!(matches!(encode(&Value::Text("12.34".into()), oid, &mut buf), Ok(IsNull::No)));
            assert_eq!(&buf[..], b"12.34");
            let mut buf = BytesMut::new();
            assert!(matches!(encode(&Value::Int(-7), oid, &mut buf), Ok(IsNull::No)));
            assert_eq!(&buf[..], b"-7");
            assert_eq!(decode(oid, Some(b"0.5000")).ok(), Some(Value::Text("0.5000".into())));
        }
        assert_eq!(wire_format(INT4_OID), 1);
        assert_eq!(wire_format(VARCHAR_OID), 1);
    }
}
