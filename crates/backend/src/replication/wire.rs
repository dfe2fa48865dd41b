//! The streaming replication protocol on a plain socket: startup with
//! `replication=database`, authentication, replication commands over the
//! simple-query protocol, and the CopyBoth stream of `START_REPLICATION`.
//!
//! Frontend messages come from `postgres-protocol`; backend messages are
//! framed here so that a message's length is checked against a bound before
//! its bytes are awaited, and the input buffer grows only as bytes arrive
//! (a corrupt length cannot make it allocate).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::ops::Range;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use postgres::config::Host;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::frontend;

use super::pgoutput::{CopyDataEvent, decode_copy_data, decode_pgoutput};
use super::{PgLsn, ReplicationEvent, quote_slot_name};
use crate::connect::DEFAULT_CONNECT_TIMEOUT_MS;
use crate::{BackendError, ConnectParams, SslMode};

/// PostgreSQL's MaxAllocSize bounds what pgoutput can put in one message
/// (its StringInfo), plus room for the envelope.
const MESSAGE_BYTES_MAX: usize = (1 << 30) + 4096;
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// A write to the server that makes no progress this long means the
/// connection is dead (the server reads continuously while streaming).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `close` waits for the server to end the stream.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01).
const POSTGRES_EPOCH_UNIX_US: i64 = 946_684_800_000_000;

/// The slot `CREATE_REPLICATION_SLOT` made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatedSlot {
    pub name: String,
    /// Changes committed after this position are streamed.
    pub consistent_point: PgLsn,
    /// The exported snapshot (`SNAPSHOT 'export'`): the database exactly as
    /// of `consistent_point`, usable by `SET TRANSACTION SNAPSHOT` until the
    /// next command on the slot's connection.
    pub snapshot: Option<String>,
}

/// A walsender connection (`replication=database`) before streaming.
pub struct ReplicationConnection {
    wire: Wire,
    backend_pid: i32,
    /// Set when the connection is in a state commands cannot continue from.
    broken: Option<String>,
}

/// The CopyBoth stream of `START_REPLICATION ... LOGICAL`.
pub struct ReplicationStream {
    wire: Wire,
    backend_pid: i32,
    last_received: PgLsn,
}

impl ReplicationConnection {
    /// Connects with `replication=database` to the database of `params`
    /// (first reachable host, TCP or Unix socket directory). Plain text
    /// only, so `sslmode` must be `disable` or `prefer`, as for
    /// [`connect_backend`](crate::connect_backend). Authentication: trust,
    /// cleartext, md5, SCRAM-SHA-256. The whole startup is bounded by the
    /// URL's `connect_timeout` (10 s by default).
    pub fn connect(params: &ConnectParams) -> Result<ReplicationConnection, BackendError> {
        let what = format!("replication connection to {}", params.shown);
        if !matches!(params.sslmode, SslMode::Disable | SslMode::Prefer) {
            return Err(BackendError::Connection {
                what,
                reason: format!(
                    "sslmode \"{}\" needs TLS, which the replication client does not have",
                    params.sslmode.name()
                ),
            });
        }
        let config = &params.config;
        let timeout =
            config.get_connect_timeout().copied().unwrap_or(Duration::from_millis(DEFAULT_CONNECT_TIMEOUT_MS));
        let deadline = Instant::now() + timeout;
        let user = config.get_user().ok_or_else(|| BackendError::Connection {
            what: what.clone(),
            reason: "the URL names no user".to_owned(),
        })?;
        let socket =
            open_socket(config, timeout).map_err(|reason| BackendError::Connection { what: what.clone(), reason })?;
        let mut wire = Wire::new(socket, what)?;
        let parameters = [
            ("user", user),
            ("database", config.get_dbname().unwrap_or(user)),
            ("replication", "database"),
            ("client_encoding", "UTF8"),
            ("application_name", config.get_application_name().unwrap_or("pgtier")),
        ];
        frontend::startup_message(parameters, &mut wire.output).map_err(|e| wire.protocol(e.to_string()))?;
        wire.flush()?;
        authenticate(&mut wire, user, config.get_password(), deadline)?;
        let mut backend_pid = 0;
        loop {
            let (tag, body) = wire.read_message_by(deadline)?;
            match tag {
                b'K' => backend_pid = wire.read_i32(body)?,
                b'S' | b'N' => {}
                b'E' => return Err(wire.server_error(body)),
                b'Z' => break,
                tag => return Err(wire.unexpected(tag, "startup")),
            }
        }
        Ok(ReplicationConnection { wire, backend_pid, broken: None })
    }

    /// Runs `sql` with the simple-query protocol (IDENTIFY_SYSTEM, SHOW,
    /// DROP_REPLICATION_SLOT, plain SQL); rows as text, None for NULL. Waits
    /// for the server as long as the command takes.
    pub fn simple_query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, BackendError> {
        if let Some(reason) = &self.broken {
            return Err(BackendError::Connection { what: self.wire.what.clone(), reason: reason.clone() });
        }
        frontend::query(sql, &mut self.wire.output).map_err(|e| self.wire.protocol(e.to_string()))?;
        self.wire.flush()?;
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            let (tag, body) = match self.wire.read_message(None) {
                Ok(Some(message)) => message,
                Ok(None) => continue,
                Err(e) => {
                    self.broken = Some(e.to_string());
                    return Err(e);
                }
            };
            match tag {
                b'D' => rows.push(self.wire.data_row(body)?),
                b'T' | b'C' | b'I' | b'N' | b'S' => {}
                b'E' => error = error.or(Some(self.wire.server_error(body))),
                b'Z' => break,
                tag => {
                    let e = self.wire.unexpected(tag, "a simple query (use start_logical for START_REPLICATION)");
                    self.broken = Some(e.to_string());
                    return Err(e);
                }
            }
        }
        match error {
            Some(error) => Err(error),
            None => Ok(rows),
        }
    }

    /// `CREATE_REPLICATION_SLOT "name" [TEMPORARY] LOGICAL pgoutput` with
    /// `(SNAPSHOT 'export')` or `(SNAPSHOT 'nothing')`.
    pub fn create_logical_slot(
        &mut self,
        name: &str,
        temporary: bool,
        export_snapshot: bool,
    ) -> Result<CreatedSlot, BackendError> {
        let quoted = quote_slot_name(name)?;
        let temporary = if temporary { "TEMPORARY " } else { "" };
        let snapshot = if export_snapshot { "export" } else { "nothing" };
        let sql = format!("CREATE_REPLICATION_SLOT {quoted} {temporary}LOGICAL pgoutput (SNAPSHOT '{snapshot}')");
        let rows = self.simple_query(&sql)?;
        let unexpected = |reason: String| BackendError::UnexpectedResult { what: sql.clone(), reason };
        let [row] = rows.as_slice() else {
            return Err(unexpected(format!("{} rows instead of 1", rows.len())));
        };
        let [Some(slot_name), Some(point), snapshot, ..] = row.as_slice() else {
            return Err(unexpected(format!("row {row:?}")));
        };
        let consistent_point = point.parse().map_err(|e: super::ParseLsnError| unexpected(e.to_string()))?;
        Ok(CreatedSlot { name: slot_name.clone(), consistent_point, snapshot: snapshot.clone() })
    }

    /// `START_REPLICATION SLOT "slot" LOGICAL start (proto_version '1',
    /// publication_names '"p1","p2"', messages 'true')`; `PgLsn(0)` starts
    /// at the slot's `confirmed_flush_lsn`.
    pub fn start_logical(
        self,
        slot: &str,
        start: PgLsn,
        publications: &[String],
    ) -> Result<ReplicationStream, BackendError> {
        self.start_logical_with(slot, start, publications, false)
    }

    /// [`Self::start_logical`]; `binary`: column values in their types'
    /// binary send format ([`TupleValue::Binary`](super::TupleValue)), as
    /// binary COPY sends them, so one decoder serves loads and the stream.
    pub fn start_logical_with(
        mut self,
        slot: &str,
        start: PgLsn,
        publications: &[String],
        binary: bool,
    ) -> Result<ReplicationStream, BackendError> {
        let quoted = quote_slot_name(slot)?;
        let sql = format!(
            "START_REPLICATION SLOT {quoted} LOGICAL {start} (proto_version '1', publication_names {}, messages 'true'{})",
            publication_names_literal(publications),
            if binary { ", binary 'true'" } else { "" }
        );
        self.wire.what = format!("replication stream of slot \"{slot}\"");
        frontend::query(&sql, &mut self.wire.output).map_err(|e| self.wire.protocol(e.to_string()))?;
        self.wire.flush()?;
        let mut error = None;
        loop {
            let Some((tag, body)) = self.wire.read_message(None)? else { continue };
            match tag {
                b'W' => break,
                b'N' | b'S' => {}
                b'E' => error = error.or(Some(self.wire.server_error(body))),
                b'Z' => {
                    return Err(
                        error.unwrap_or_else(|| self.wire.protocol("START_REPLICATION ended without streaming"))
                    );
                }
                tag => return Err(self.wire.unexpected(tag, "START_REPLICATION")),
            }
        }
        Ok(ReplicationStream { wire: self.wire, backend_pid: self.backend_pid, last_received: PgLsn(0) })
    }

    /// The walsender's process id.
    pub fn backend_pid(&self) -> i32 {
        self.backend_pid
    }
}

/// `'"p1","p2"'`: identifiers double-quoted, the list as a string literal
/// (replication commands know no backslash escapes).
fn publication_names_literal(publications: &[String]) -> String {
    let names: Vec<String> = publications.iter().map(|p| format!("\"{}\"", p.replace('"', "\"\""))).collect();
    format!("'{}'", names.join(",").replace('\'', "''"))
}

impl ReplicationStream {
    /// The next decoded event, waiting at most `timeout`; None when none
    /// arrived in time (a message cut by the timeout stays buffered).
    /// Keepalives are events: acknowledging is the caller's decision.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<ReplicationEvent>, BackendError> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some((tag, body)) = self.wire.read_message(Some(deadline))? else { return Ok(None) };
            match tag {
                b'd' => {
                    let data = &self.wire.input[body];
                    let envelope = decode_copy_data(data).map_err(|e| self.wire.protocol(e.to_string()))?;
                    return match envelope {
                        CopyDataEvent::Keepalive(event) => Ok(Some(event)),
                        CopyDataEvent::XLogData { wal_end, payload, .. } => {
                            let event = decode_pgoutput(payload).map_err(|e| self.wire.protocol(e.to_string()))?;
                            self.last_received = wal_end;
                            Ok(Some(event))
                        }
                    };
                }
                b'N' | b'S' => {}
                b'E' => return Err(self.wire.server_error(body)),
                b'c' => {
                    return Err(BackendError::Connection {
                        what: self.wire.what.clone(),
                        reason: "the server ended the replication stream".to_owned(),
                    });
                }
                tag => return Err(self.wire.unexpected(tag, "streaming")),
            }
        }
    }

    /// Standby status update ('r') with the current time; never asks the
    /// server for a reply.
    pub fn send_status(&mut self, written: PgLsn, flushed: PgLsn, applied: PgLsn) -> Result<(), BackendError> {
        let now_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        let mut body = Vec::with_capacity(34);
        body.push(b'r');
        for position in [written, flushed, applied] {
            body.extend(position.0.to_be_bytes());
        }
        body.extend((now_us - POSTGRES_EPOCH_UNIX_US).to_be_bytes());
        body.push(0);
        self.wire.copy_data(&body);
        self.wire.flush()
    }

    /// Ends the stream: CopyDone, waits (at most 10 s) for the server to
    /// finish the command, Terminate. Best effort; the socket is closed in
    /// any case.
    pub fn close(mut self) -> Result<(), BackendError> {
        frontend::copy_done(&mut self.wire.output);
        let mut result = self.wire.flush();
        let deadline = Instant::now() + CLOSE_TIMEOUT;
        while result.is_ok() {
            match self.wire.read_message(Some(deadline)) {
                Ok(Some((b'Z', _))) => break,
                Ok(Some((b'E', body))) => result = Err(self.wire.server_error(body)),
                Ok(Some(_)) => {}
                Ok(None) => {
                    result = Err(BackendError::Connection {
                        what: self.wire.what.clone(),
                        reason: "timed out waiting for the server to end the stream".to_owned(),
                    });
                }
                Err(e) => result = Err(e),
            }
        }
        frontend::terminate(&mut self.wire.output);
        // The server may already be gone; the socket closes either way.
        let _ = self.wire.flush();
        self.wire.socket.shutdown();
        result
    }

    /// The walsender's process id (for `pg_terminate_backend`).
    pub fn backend_pid(&self) -> i32 {
        self.backend_pid
    }

    /// `wal_end` of the last XLogData received (`PgLsn(0)` before any).
    pub fn last_received(&self) -> PgLsn {
        self.last_received
    }
}

fn authenticate(wire: &mut Wire, user: &str, password: Option<&[u8]>, deadline: Instant) -> Result<(), BackendError> {
    let mut scram: Option<ScramSha256> = None;
    loop {
        let (tag, body) = wire.read_message_by(deadline)?;
        match tag {
            b'R' => {}
            b'E' => return Err(wire.server_error(body)),
            b'N' => continue,
            tag => return Err(wire.unexpected(tag, "authentication")),
        }
        let request = wire.input[body.clone()].to_vec();
        let (code, data) = request.split_at_checked(4).ok_or_else(|| wire.protocol("short authentication request"))?;
        let code = i32::from_be_bytes([code[0], code[1], code[2], code[3]]);
        let need_password = || {
            password.ok_or_else(|| BackendError::Server {
                what: wire.what.clone(),
                sqlstate: "28P01".to_owned(),
                message: "the server requires a password and none was given".to_owned(),
                detail: None,
                hint: None,
            })
        };
        let sent = match code {
            0 => return Ok(()),
            3 => frontend::password_message(need_password()?, &mut wire.output),
            5 => {
                let salt: [u8; 4] = data.try_into().map_err(|_| wire.protocol("md5 request without a 4-byte salt"))?;
                let hash = md5_hash(user.as_bytes(), need_password()?, salt);
                frontend::password_message(hash.as_bytes(), &mut wire.output)
            }
            10 => {
                let offers_scram = data.split(|&b| b == 0).any(|m| m == SCRAM_SHA_256.as_bytes());
                if !offers_scram {
                    return Err(wire.protocol("the server offers no SASL mechanism this client knows (SCRAM-SHA-256)"));
                }
                let started = ScramSha256::new(need_password()?, ChannelBinding::unsupported());
                let sent = frontend::sasl_initial_response(SCRAM_SHA_256, started.message(), &mut wire.output);
                scram = Some(started);
                sent
            }
            11 => {
                let state = scram.as_mut().ok_or_else(|| wire.protocol("SASL continue without SASL"))?;
                state.update(data).map_err(|e| wire.protocol(format!("SCRAM: {e}")))?;
                frontend::sasl_response(state.message(), &mut wire.output)
            }
            12 => {
                let state = scram.as_mut().ok_or_else(|| wire.protocol("SASL final without SASL"))?;
                state.finish(data).map_err(|e| wire.protocol(format!("SCRAM server signature: {e}")))?;
                continue;
            }
            code => {
                return Err(BackendError::Connection {
                    what: wire.what.clone(),
                    reason: format!(
                        "authentication method {code} is not supported (trust, password, md5, scram-sha-256 are)"
                    ),
                });
            }
        };
        sent.map_err(|e| wire.protocol(e.to_string()))?;
        wire.flush()?;
    }
}

/// Tries each host in turn (libpq's order); the error names the last failure.
fn open_socket(config: &postgres::Config, timeout: Duration) -> Result<Socket, String> {
    let ports = config.get_ports();
    let mut last_error = "the URL names no host".to_owned();
    for (index, host) in config.get_hosts().iter().enumerate() {
        let port = ports.get(index).or(ports.first()).copied().unwrap_or(5432);
        match host {
            Host::Tcp(name) => {
                let addresses = match (name.as_str(), port).to_socket_addrs() {
                    Ok(addresses) => addresses,
                    Err(e) => {
                        last_error = format!("could not resolve {name}: {e}");
                        continue;
                    }
                };
                for address in addresses {
                    match TcpStream::connect_timeout(&address, timeout) {
                        Ok(stream) => {
                            // Status updates are small and must not wait for Nagle.
                            let _ = stream.set_nodelay(true);
                            set_tcp_keepalive(&stream);
                            return Ok(Socket::Tcp(stream));
                        }
                        Err(e) => last_error = format!("could not connect to {address}: {e}"),
                    }
                }
            }
            Host::Unix(dir) => {
                let path = dir.join(format!(".s.PGSQL.{port}"));
                match UnixStream::connect(&path) {
                    Ok(stream) => return Ok(Socket::Unix(stream)),
                    Err(e) => last_error = format!("could not connect to {}: {e}", path.display()),
                }
            }
        }
    }
    Err(last_error)
}

/// TCP keepalive (idle 60 s, then 6 probes 10 s apart): a stream that an
/// acknowledging caller keeps quiet can stay silent indefinitely, so a
/// server host that vanishes without a reset is noticed here, in about two
/// minutes, instead of never. Best effort: failing to set it is not an error.
fn set_tcp_keepalive(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let fd = stream.as_raw_fd();
    let options = [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 60),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 10),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 6),
    ];
    for (level, name, value) in options {
        let value: libc::c_int = value;
        // SAFETY: `fd` is an open socket owned by `stream`, and the option
        // value is a c_int whose size is passed with it.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                std::ptr::from_ref(&value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_read_timeout(timeout),
            Socket::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_write_timeout(timeout),
            Socket::Unix(s) => s.set_write_timeout(timeout),
        }
    }

    fn shutdown(&self) {
        let _ = match self {
            Socket::Tcp(s) => s.shutdown(Shutdown::Both),
            Socket::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.flush(),
            Socket::Unix(s) => s.flush(),
        }
    }
}

/// A socket with its input buffer: `input[consumed..]` is not yet parsed.
struct Wire {
    socket: Socket,
    input: Vec<u8>,
    consumed: usize,
    output: BytesMut,
    /// Names the connection in errors; never holds a password.
    what: String,
}

impl Wire {
    fn new(socket: Socket, what: String) -> Result<Wire, BackendError> {
        let wire = Wire { socket, input: Vec::new(), consumed: 0, output: BytesMut::new(), what };
        wire.socket.set_write_timeout(Some(WRITE_TIMEOUT)).map_err(|e| wire.io_error(&e))?;
        Ok(wire)
    }

    fn io_error(&self, error: &io::Error) -> BackendError {
        BackendError::Connection { what: self.what.clone(), reason: error.to_string() }
    }

    fn protocol(&self, reason: impl Into<String>) -> BackendError {
        BackendError::Protocol { what: self.what.clone(), reason: reason.into() }
    }

    fn unexpected(&self, tag: u8, during: &str) -> BackendError {
        self.protocol(format!("unexpected message type 0x{tag:02x} during {during}"))
    }

    fn flush(&mut self) -> Result<(), BackendError> {
        let result = self.socket.write_all(&self.output);
        self.output.clear();
        result.map_err(|e| self.io_error(&e))
    }

    fn copy_data(&mut self, body: &[u8]) {
        self.output.extend_from_slice(b"d");
        // Bodies here are a few dozen bytes.
        let length = u32::try_from(body.len() + 4).unwrap_or(u32::MAX);
        self.output.extend_from_slice(&length.to_be_bytes());
        self.output.extend_from_slice(body);
    }

    /// The next whole message already buffered: its tag and body range.
    fn buffered_message(&mut self) -> Result<Option<(u8, Range<usize>)>, BackendError> {
        let pending = &self.input[self.consumed..];
        let Some(header) = pending.get(..5) else { return Ok(None) };
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        if !(4..=MESSAGE_BYTES_MAX).contains(&length) {
            return Err(self.protocol(format!("message length {length} out of range")));
        }
        if pending.len() < 1 + length {
            return Ok(None);
        }
        let start = self.consumed + 5;
        let end = self.consumed + 1 + length;
        self.consumed = end;
        Ok(Some((header[0], start..end)))
    }

    /// The next message, waiting until `deadline` (None: as long as it
    /// takes). The body stays in `input` until the next call.
    fn read_message(&mut self, deadline: Option<Instant>) -> Result<Option<(u8, Range<usize>)>, BackendError> {
        loop {
            if let Some(message) = self.buffered_message()? {
                return Ok(Some(message));
            }
            if self.consumed > 0 {
                self.input.drain(..self.consumed);
                self.consumed = 0;
            }
            let timeout = match deadline {
                None => None,
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(None),
                },
            };
            self.socket.set_read_timeout(timeout).map_err(|e| self.io_error(&e))?;
            let filled = self.input.len();
            self.input.resize(filled + READ_CHUNK_BYTES, 0);
            let read = self.socket.read(&mut self.input[filled..]);
            self.input.truncate(filled + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(0) => {
                    return Err(BackendError::Connection {
                        what: self.what.clone(),
                        reason: "server closed the connection unexpectedly".to_owned(),
                    });
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(self.io_error(&e)),
            }
        }
    }

    /// [`read_message`](Self::read_message) where running out of time is an error.
    fn read_message_by(&mut self, deadline: Instant) -> Result<(u8, Range<usize>), BackendError> {
        self.read_message(Some(deadline))?
            .ok_or_else(|| BackendError::Connection { what: self.what.clone(), reason: "timeout expired".to_owned() })
    }

    fn read_i32(&self, body: Range<usize>) -> Result<i32, BackendError> {
        let bytes = self.input.get(body).and_then(|b| b.get(..4)).ok_or_else(|| self.protocol("short message"))?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// ErrorResponse → [`BackendError::Server`] with PostgreSQL's fields.
    fn server_error(&self, body: Range<usize>) -> BackendError {
        let (mut sqlstate, mut message, mut detail, mut hint) = (None, None, None, None);
        for field in self.input[body].split(|&b| b == 0) {
            let Some((&kind, value)) = field.split_first() else { continue };
            let value = String::from_utf8_lossy(value).into_owned();
            match kind {
                b'C' => sqlstate = Some(value),
                b'M' => message = Some(value),
                b'D' => detail = Some(value),
                b'H' => hint = Some(value),
                _ => {}
            }
        }
        BackendError::Server {
            what: self.what.clone(),
            sqlstate: sqlstate.unwrap_or_else(|| "XX000".to_owned()),
            message: message.unwrap_or_default(),
            detail,
            hint,
        }
    }

    fn data_row(&self, body: Range<usize>) -> Result<Vec<Option<String>>, BackendError> {
        let bad = || self.protocol("malformed DataRow");
        let mut bytes = &self.input[body];
        let take = |bytes: &mut &[u8], n: usize| -> Option<Vec<u8>> {
            let (head, tail) = bytes.split_at_checked(n)?;
            *bytes = tail;
            Some(head.to_vec())
        };
        let count = take(&mut bytes, 2).ok_or_else(bad)?;
        let count = u16::from_be_bytes([count[0], count[1]]);
        let mut row = Vec::with_capacity(usize::from(count).min(bytes.len() / 4));
        for _ in 0..count {
            let length = take(&mut bytes, 4).ok_or_else(bad)?;
            let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
            if length < 0 {
                row.push(None);
                continue;
            }
            let value = take(&mut bytes, length as usize).ok_or_else(bad)?;
            row.push(Some(String::from_utf8(value).map_err(|_| self.protocol("DataRow value is not UTF-8"))?));
        }
        if !bytes.is_empty() {
            return Err(bad());
        }
        Ok(row)
    }
}

/// Framing over a socket pair: what the server's bytes look like when they
/// arrive in pieces or lie about their length. (Behaviour against a real
/// walsender is in tests/replication.rs.)
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn stream_over_pair() -> (ReplicationStream, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let wire = Wire::new(Socket::Unix(ours), "test stream".to_owned()).unwrap();
        (ReplicationStream { wire, backend_pid: 7, last_received: PgLsn(0) }, theirs)
    }

    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        out.extend(u32::try_from(body.len() + 4).unwrap().to_be_bytes());
        out.extend(body);
        out
    }

    fn xlogdata(wal_end: u64, payload: &[u8]) -> Vec<u8> {
        let mut body = vec![b'w'];
        body.extend(1u64.to_be_bytes());
        body.extend(wal_end.to_be_bytes());
        body.extend(0i64.to_be_bytes());
        body.extend(payload);
        message(b'd', &body)
    }

    #[test]
    fn a_message_split_by_timeouts_completes_later() {
        let (mut stream, mut server) = stream_over_pair();
        let mut begin = vec![b'B'];
        begin.extend(0x10u64.to_be_bytes());
        begin.extend(5i64.to_be_bytes());
        begin.extend(9u32.to_be_bytes());
        let bytes = xlogdata(0x20, &begin);
        server.write_all(&bytes[..7]).unwrap();
        let began = Instant::now();
        assert_eq!(stream.next_event(Duration::from_millis(100)).unwrap(), None);
        assert!(began.elapsed() >= Duration::from_millis(100));
        server.write_all(&bytes[7..]).unwrap();
        let event = stream.next_event(Duration::from_secs(5)).unwrap();
        assert_eq!(event, Some(ReplicationEvent::Begin { final_lsn: PgLsn(0x10), commit_time_us: 5, xid: 9 }));
        assert_eq!(stream.last_received(), PgLsn(0x20));
        assert_eq!(stream.next_event(Duration::ZERO).unwrap(), None);
    }

    #[test]
    fn a_huge_length_is_refused_before_reading() {
        let (mut stream, mut server) = stream_over_pair();
        server.write_all(&[b'd', 0x7f, 0xff, 0xff, 0xff]).unwrap();
        let error = stream.next_event(Duration::from_secs(5)).unwrap_err();
        assert_eq!(error.sqlstate(), "08P01", "{error}");
        assert!(stream.wire.input.capacity() <= 2 * READ_CHUNK_BYTES);
    }

    #[test]
    fn errors_and_end_of_stream_are_reported() {
        let (mut stream, mut server) = stream_over_pair();
        server.write_all(&message(b'N', b"SNOTICE\0C00000\0Mhello\0\0")).unwrap();
        server.write_all(&message(b'E', b"SFATAL\0C57P01\0Mterminating connection\0Dd\0Hh\0\0")).unwrap();
        let error = stream.next_event(Duration::from_secs(5)).unwrap_err();
        assert_eq!(error.sqlstate(), "57P01");
        assert!(
            matches!(&error, BackendError::Server { message, detail: Some(d), hint: Some(h), .. }
            if message == "terminating connection" && d == "d" && h == "h"),
            "{error:?}"
        );
        server.write_all(&xlogdata(1, b"Z")).unwrap();
        assert_eq!(stream.next_event(Duration::from_secs(5)).unwrap_err().sqlstate(), "08P01");
        drop(server);
        assert_eq!(stream.next_event(Duration::from_secs(5)).unwrap_err().sqlstate(), "08006");
    }

    #[test]
    fn status_updates_carry_the_positions() {
        let (mut stream, mut server) = stream_over_pair();
        stream.send_status(PgLsn(1), PgLsn(2), PgLsn(3)).unwrap();
        let mut bytes = [0u8; 39];
        server.read_exact(&mut bytes).unwrap();
        assert_eq!(&bytes[..6], &[b'd', 0, 0, 0, 38, b'r']);
        assert_eq!(&bytes[6..30], [1u64, 2, 3].map(u64::to_be_bytes).concat().as_slice());
        let sent_us = i64::from_be_bytes(bytes[30..38].try_into().unwrap());
        // Microseconds since 2000-01-01: after 2024, before 2100.
        assert!((757_382_400_000_000..3_155_760_000_000_000).contains(&sent_us), "{sent_us}");
        assert_eq!(bytes[38], 0);
    }

    #[test]
    fn tcp_connections_use_keepalive() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut config = postgres::Config::new();
        config.host("127.0.0.1").port(listener.local_addr().unwrap().port());
        let Socket::Tcp(stream) = open_socket(&config, Duration::from_secs(5)).unwrap() else {
            panic!("not TCP");
        };
        use std::os::fd::AsRawFd;
        let mut idle: libc::c_int = 0;
        let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: an open socket, a c_int buffer and its length.
        let result = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_KEEPIDLE,
                std::ptr::from_mut(&mut idle).cast(),
                &mut length,
            )
        };
        assert_eq!((result, idle), (0, 60));
    }

    #[test]
    fn publication_names_are_quoted_twice() {
        let names = ["p".to_owned(), "we\"ird'".to_owned()];
        assert_eq!(publication_names_literal(&names), r#"'"p","we""ird''"'"#);
    }
}
