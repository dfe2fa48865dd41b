//! Bytes in and out of one connection: the socket (plain or TLS), framing
//! with a size bound checked before a body is buffered, frontend decoding
//! (pgwire's codec; Bind and Execute read in place, without allocating),
//! and writers for the backend messages. The hot ones
//! (DataRow, CommandComplete, BindComplete, ReadyForQuery) are written
//! straight into the output buffer: no message struct, no allocation.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use bytes::{BufMut, BytesMut};
use pgtier_sql::SqlError;
use pgwire::messages::response::{ErrorResponse, NoticeResponse};
use pgwire::messages::{DecodeContext, PgWireBackendMessage, PgWireFrontendMessage, ProtocolVersion};

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Pending output beyond this is written out even before a Sync, so a
/// client that pipelines without reading cannot grow it without bound.
pub const WRITE_FLUSH_BYTES: usize = 64 * 1024;
/// Largest startup-phase packet (PostgreSQL's MAX_STARTUP_PACKET_LENGTH).
const STARTUP_PACKET_MAX_BYTES: usize = 10_000;

pub enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
    /// Only while the plain stream is being wrapped in TLS.
    Closed,
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "closed")
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            Stream::Closed => Err(closed()),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
            Stream::Closed => Err(closed()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
            Stream::Closed => Err(closed()),
        }
    }
}

/// Why reading the next message stopped the session.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed (or half-closed) its side, or the socket failed.
    Closed,
    /// Nonsense on the wire: answered with a FATAL 08P01, then closed.
    Protocol(String),
    /// The next message has not arrived (only from `read_frame_between`
    /// with `park`: the event loop serves someone else meanwhile).
    WouldBlock,
}

/// One read that does not wait (MSG_DONTWAIT: the socket itself stays
/// blocking for everyone else). Ok(None): nothing to read yet.
fn read_now(tcp: &TcpStream, buf: &mut [u8]) -> Result<Option<usize>, ReadError> {
    loop {
        // SAFETY: reads at most buf.len() bytes into a live buffer.
        let got = unsafe { libc::recv(tcp.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if got > 0 {
            return Ok(Some(got as usize));
        }
        if got == 0 {
            return Err(ReadError::Closed);
        }
        match io::Error::last_os_error().kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => {}
            _ => return Err(ReadError::Closed),
        }
    }
}

/// Writes what the socket takes without waiting; returns the bytes taken.
fn write_now(tcp: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < buf.len() {
        let rest = &buf[sent..];
        // SAFETY: sends at most rest.len() bytes from a live buffer.
        let n = unsafe {
            libc::send(tcp.as_raw_fd(), rest.as_ptr().cast(), rest.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        if n >= 0 {
            sent += n as usize;
            continue;
        }
        match io::Error::last_os_error() {
            e if e.kind() == io::ErrorKind::WouldBlock => break,
            e if e.kind() == io::ErrorKind::Interrupted => {}
            e => return Err(e),
        }
    }
    Ok(sent)
}

/// One read; 0 bytes (EOF) is `Closed`.
fn read_some(stream: &mut Stream, buf: &mut [u8]) -> Result<usize, ReadError> {
    loop {
        match stream.read(buf) {
            Ok(0) => return Err(ReadError::Closed),
            Ok(got) => return Ok(got),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> ReadError {
        ReadError::Closed
    }
}

pub struct Wire {
    pub stream: Stream,
    pub rbuf: BytesMut,
    pub wbuf: BytesMut,
    pub ctx: DecodeContext,
    pub max_message_bytes: usize,
    chunk: Box<[u8]>,
    /// Set by `read_frame_between(true)`: a read that would wait returns
    /// `WouldBlock` instead.
    park: bool,
    /// `[log] log_error_detail`: errors sent are logged with their DETAIL.
    pub log_error_detail: bool,
}

impl Wire {
    pub fn new(stream: Stream, max_message_bytes: usize) -> Wire {
        Wire {
            stream,
            rbuf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            wbuf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            ctx: DecodeContext::new(ProtocolVersion::PROTOCOL3_0),
            max_message_bytes,
            chunk: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
            park: false,
            log_error_detail: false,
        }
    }

    /// Between messages on a session's own thread: flushes the answers,
    /// then waits up to `timeout` for the client's next bytes. False: none
    /// came (idle_in_transaction_session_timeout). A TLS session's bytes
    /// already decrypted into rustls but not yet read are not seen, so
    /// there it may report false for a client that pipelined.
    pub fn wait_for_client(&mut self, timeout: std::time::Duration) -> io::Result<bool> {
        if !self.rbuf.is_empty() {
            return Ok(true);
        }
        self.flush()?;
        let fd = match &self.stream {
            Stream::Plain(t) => std::os::fd::AsRawFd::as_raw_fd(t),
            Stream::Tls(t) => std::os::fd::AsRawFd::as_raw_fd(&t.sock),
            Stream::Closed => return Err(closed()),
        };
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
            let mut fds = libc::pollfd { fd, events: libc::POLLIN | libc::POLLRDHUP, revents: 0 };
            // SAFETY: one valid pollfd for the duration of the call.
            match unsafe { libc::poll(&mut fds, 1, ms) } {
                n if n > 0 => return Ok(true),
                0 => {}
                _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                _ => return Err(io::Error::last_os_error()),
            }
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        let mut sent = 0;
        if let Stream::Plain(tcp) = &self.stream
            && crate::event_loop::on_loop_thread()
        {
            sent = write_now(tcp, &self.wbuf)?;
            if sent < self.wbuf.len() {
                // The client is not reading: wait, but not with the loop.
                crate::event_loop::before_wait();
            }
        }
        self.stream.write_all(&self.wbuf[sent..])?;
        self.stream.flush()?;
        self.wbuf.clear();
        Ok(())
    }

    /// Reads until `n` bytes are buffered; pending output goes out first
    /// (the client may be waiting for it before it sends more).
    fn fill(&mut self, n: usize) -> Result<(), ReadError> {
        while self.rbuf.len() < n {
            self.flush()?;
            if let Stream::Plain(tcp) = &self.stream
                && (self.park || crate::event_loop::on_loop_thread())
            {
                // Trying first costs a system call, and is what lets an
                // event loop serve a session without ever waiting on it.
                if let Some(got) = read_now(tcp, &mut self.chunk[..])? {
                    self.rbuf.extend_from_slice(&self.chunk[..got]);
                    continue;
                }
                if self.park {
                    return Err(ReadError::WouldBlock);
                }
                crate::event_loop::before_wait();
            }
            let missing = n - self.rbuf.len();
            if missing > READ_CHUNK_BYTES {
                // A large message of known length: read it in place
                // (zeroing it once costs less than copying it twice).
                let start = self.rbuf.len();
                self.rbuf.resize(start + missing, 0);
                let got = read_some(&mut self.stream, &mut self.rbuf[start..]);
                self.rbuf.truncate(start + got.as_ref().map_or(0, |g| *g));
                got?;
                continue;
            }
            // Small reads go through a buffer zeroed once per session, so
            // a request costs a copy of its own bytes and no memset.
            let got = read_some(&mut self.stream, &mut self.chunk[..])?;
            self.rbuf.extend_from_slice(&self.chunk[..got]);
        }
        Ok(())
    }

    /// One startup-phase packet (SSLRequest, GSSENCRequest, StartupMessage,
    /// CancelRequest): the length comes first, there is no type byte.
    pub fn read_startup(&mut self) -> Result<PgWireFrontendMessage, ReadError> {
        self.fill(4)?;
        let len = u32::from_be_bytes([self.rbuf[0], self.rbuf[1], self.rbuf[2], self.rbuf[3]]) as usize;
        if !(8..=STARTUP_PACKET_MAX_BYTES).contains(&len) {
            return Err(ReadError::Protocol("invalid length of startup packet".to_owned()));
        }
        self.fill(len)?;
        loop {
            let (rbuf, ctx) = (&mut self.rbuf, &self.ctx);
            let decoded =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| PgWireFrontendMessage::decode(rbuf, ctx)))
                    .unwrap_or_else(|_| Ok(None));
            match decoded {
                Ok(Some(PgWireFrontendMessage::SslNegotiation(pgwire::messages::SslNegotiationMetaMessage::None))) => {
                    // Not an SSL/GSS request: decode as startup or cancel.
                    self.ctx.awaiting_frontend_ssl = false;
                }
                Ok(Some(msg)) => return Ok(msg),
                Ok(None) => return Err(ReadError::Protocol("incomplete startup packet".to_owned())),
                Err(e) => return Err(ReadError::Protocol(format!("invalid startup packet: {e}"))),
            }
        }
    }

    /// The next regular message. Its length is checked against the limit
    /// before the body is read, so an oversized message costs no memory.
    pub fn read_message(&mut self) -> Result<PgWireFrontendMessage, ReadError> {
        self.read_frame()?;
        self.decode_frame()
    }

    /// Buffers the whole next message and returns its type byte; the
    /// message stays at the head of `rbuf` for [`Wire::frame_body`] and
    /// [`Wire::consume_frame`], or [`Wire::decode_frame`].
    /// `read_frame` between messages; with `park`, returns `WouldBlock`
    /// rather than wait for the client (a partial message stays buffered).
    pub fn read_frame_between(&mut self, park: bool) -> Result<u8, ReadError> {
        self.park = park;
        let frame = self.read_frame();
        self.park = false;
        frame
    }

    pub fn read_frame(&mut self) -> Result<u8, ReadError> {
        self.fill(5)?;
        let len = self.frame_len();
        if len < 4 || len > self.max_message_bytes {
            return Err(ReadError::Protocol(format!("invalid message length {len}")));
        }
        self.fill(len + 1)?;
        Ok(self.rbuf[0])
    }

    /// The length field of the buffered message (itself included).
    fn frame_len(&self) -> usize {
        u32::from_be_bytes([self.rbuf[1], self.rbuf[2], self.rbuf[3], self.rbuf[4]]) as usize
    }

    /// The body of the message `read_frame` buffered.
    pub fn frame_body(&self) -> &[u8] {
        &self.rbuf[5..self.frame_len() + 1]
    }

    /// Drops the message `read_frame` buffered.
    pub fn consume_frame(&mut self) {
        let len = self.frame_len();
        bytes::Buf::advance(&mut self.rbuf, len + 1);
    }

    /// Decodes the message `read_frame` buffered with pgwire's codec.
    pub fn decode_frame(&mut self) -> Result<PgWireFrontendMessage, ReadError> {
        // pgwire's decoders can panic on inconsistent counts inside a
        // message (found by tests/robustness.rs); a panic is a malformed
        // message here, not a dead session.
        let (rbuf, ctx) = (&mut self.rbuf, &self.ctx);
        let decoded =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| PgWireFrontendMessage::decode(rbuf, ctx)));
        let Ok(decoded) = decoded else {
            return Err(ReadError::Protocol("invalid frontend message".to_owned()));
        };
        match decoded {
            Ok(Some(msg)) => Ok(msg),
            Ok(None) => Err(ReadError::Protocol("incomplete message".to_owned())),
            Err(e) => Err(ReadError::Protocol(format!("invalid frontend message: {e}"))),
        }
    }

    /// Encodes a pgwire backend message (the less frequent ones).
    pub fn send(&mut self, msg: PgWireBackendMessage) {
        // Encoding into a growable buffer fails only for messages over
        // pgwire's size limits, which nothing we send approaches; an error
        // message would be the only output, so drop it rather than panic.
        let _ = msg.encode(&mut self.wbuf);
    }

    /// Starts a message; returns where its length goes.
    pub fn begin(&mut self, tag: u8) -> usize {
        self.wbuf.put_u8(tag);
        let at = self.wbuf.len();
        self.wbuf.put_i32(0);
        at
    }

    /// Patches the length of the message started at `at`.
    pub fn end(&mut self, at: usize) {
        let len = i32::try_from(self.wbuf.len() - at).unwrap_or(i32::MAX);
        self.wbuf[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }

    pub fn ready_for_query(&mut self, status: u8) {
        self.wbuf.put_slice(&[b'Z', 0, 0, 0, 5, status]);
    }

    pub fn bind_complete(&mut self) {
        self.wbuf.put_slice(&[b'2', 0, 0, 0, 4]);
    }

    pub fn parse_complete(&mut self) {
        self.wbuf.put_slice(&[b'1', 0, 0, 0, 4]);
    }

    pub fn close_complete(&mut self) {
        self.wbuf.put_slice(&[b'3', 0, 0, 0, 4]);
    }

    pub fn no_data(&mut self) {
        self.wbuf.put_slice(&[b'n', 0, 0, 0, 4]);
    }

    pub fn empty_query(&mut self) {
        self.wbuf.put_slice(&[b'I', 0, 0, 0, 4]);
    }

    pub fn portal_suspended(&mut self) {
        self.wbuf.put_slice(&[b's', 0, 0, 0, 4]);
    }

    pub fn copy_done(&mut self) {
        self.wbuf.put_slice(&[b'c', 0, 0, 0, 4]);
    }

    pub fn command_complete(&mut self, tag: impl std::fmt::Display) {
        let at = self.begin(b'C');
        let _ = write!(self.wbuf, "{tag}");
        self.wbuf.put_u8(0);
        self.end(at);
    }

    pub fn parameter_status(&mut self, name: &str, value: &str) {
        let at = self.begin(b'S');
        self.wbuf.put_slice(name.as_bytes());
        self.wbuf.put_u8(0);
        self.wbuf.put_slice(value.as_bytes());
        self.wbuf.put_u8(0);
        self.end(at);
    }

    pub fn error(&mut self, e: &SqlError, severity: &str) {
        self.error_at(e, severity, None);
    }

    /// An error with its position in the statement text (1-based chars).
    pub fn error_at(&mut self, e: &SqlError, severity: &str, position: Option<u32>) {
        crate::logging::client_error(e, severity, self.log_error_detail);
        let mut f = fields(e, severity);
        if let Some(p) = position {
            // PostgreSQL sends P right after M.
            f.insert(4, (b'P', p.to_string()));
        }
        self.send(PgWireBackendMessage::ErrorResponse(ErrorResponse::new(f)));
    }

    pub fn notice(&mut self, e: &SqlError, severity: &str) {
        self.send(PgWireBackendMessage::NoticeResponse(NoticeResponse::new(fields(e, severity))));
    }
}

/// ErrorResponse/NoticeResponse fields, in PostgreSQL's order.
fn fields(e: &SqlError, severity: &str) -> Vec<(u8, String)> {
    let mut f = vec![
        (b'S', severity.to_owned()),
        (b'V', severity.to_owned()),
        (b'C', e.sqlstate.to_owned()),
        (b'M', e.message.clone()),
    ];
    if let Some(d) = &e.detail {
        f.push((b'D', d.clone()));
    }
    if let Some(h) = &e.hint {
        f.push((b'H', h.clone()));
    }
    if let Some(c) = &e.constraint {
        f.push((b'n', c.clone()));
    }
    f
}

/// Reads the fields of one message body, never past its end.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err("invalid frontend message: field runs past the message end".to_owned());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A NUL-terminated name; empty is None (the unnamed statement or
    /// portal). Invalid UTF-8 is replaced, as pgwire's decoder does.
    fn name(&mut self) -> Result<Option<Cow<'a, str>>, String> {
        let Some(end) = self.buf.iter().position(|&b| b == 0) else {
            return Err("invalid frontend message: unterminated string".to_owned());
        };
        let s = self.take(end + 1)?;
        Ok((end > 0).then(|| String::from_utf8_lossy(&s[..end])))
    }

    fn end(&self) -> Result<(), String> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err("invalid frontend message: bytes after the last field".to_owned())
        }
    }
}

/// Format codes as they sit in the message (big-endian int16s).
#[derive(Clone, Copy)]
pub struct Codes<'a>(&'a [u8]);

impl Codes<'_> {
    pub fn len(&self) -> usize {
        self.0.len() / 2
    }

    pub fn get(&self, i: usize) -> Option<i16> {
        self.0.get(2 * i..2 * i + 2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }

    pub fn iter(&self) -> impl Iterator<Item = i16> + '_ {
        self.0.chunks_exact(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }
}

/// A Bind read in place from its message body: names, format codes and
/// parameter values borrow the body. Bind is on the hot path of every
/// prepared-statement round trip, and pgwire's decoder allocates for
/// each name, each list and the parameter vector.
pub struct BindRef<'a> {
    pub portal_name: Option<Cow<'a, str>>,
    pub statement_name: Option<Cow<'a, str>>,
    pub parameter_format_codes: Codes<'a>,
    /// The parameter section, already checked to hold `param_count` values.
    params: &'a [u8],
    pub param_count: usize,
    pub result_column_format_codes: Codes<'a>,
}

impl<'a> BindRef<'a> {
    pub fn parse(body: &'a [u8]) -> Result<BindRef<'a>, String> {
        let mut r = Reader { buf: body };
        let portal_name = r.name()?;
        let statement_name = r.name()?;
        let n = usize::from(r.u16()?);
        let parameter_format_codes = Codes(r.take(2 * n)?);
        let param_count = usize::from(r.u16()?);
        let start = r.buf;
        for _ in 0..param_count {
            let len = r.i32()?;
            match usize::try_from(len) {
                Ok(len) => {
                    r.take(len)?;
                }
                Err(_) if len == -1 => {}
                Err(_) => return Err(format!("invalid frontend message: parameter length {len}")),
            }
        }
        let params = &start[..start.len() - r.buf.len()];
        let n = usize::from(r.u16()?);
        let result_column_format_codes = Codes(r.take(2 * n)?);
        r.end()?;
        Ok(BindRef {
            portal_name,
            statement_name,
            parameter_format_codes,
            params,
            param_count,
            result_column_format_codes,
        })
    }

    /// The parameter values in order; None is SQL NULL.
    pub fn parameters(&self) -> impl Iterator<Item = Option<&'a [u8]>> + use<'a> {
        let mut r = Reader { buf: self.params };
        (0..self.param_count).map(move |_| {
            // parse() checked the section, so these reads cannot fail.
            let len = r.i32().unwrap_or(-1);
            usize::try_from(len).ok().and_then(|len| r.take(len).ok())
        })
    }
}

/// An Execute read in place: the portal name (None: unnamed) and the row
/// limit (0: all).
pub fn parse_execute(body: &[u8]) -> Result<(Option<Cow<'_, str>>, i32), String> {
    let mut r = Reader { buf: body };
    let name = r.name()?;
    let max_rows = r.i32()?;
    r.end()?;
    Ok((name, max_rows))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pgwire::messages::Message;
    use pgwire::messages::extendedquery::Bind;

    /// The body (after type byte and length) of a message pgwire encodes.
    fn body(m: &impl Message) -> Vec<u8> {
        let mut buf = BytesMut::new();
        m.encode(&mut buf).unwrap();
        buf[5..].to_vec()
    }

    #[test]
    fn bind_reads_what_pgwire_writes() {
        let params = vec![Some(bytes::Bytes::from_static(b"42")), None, Some(bytes::Bytes::new())];
        let m = Bind::new(Some("p1".into()), Some("s1".into()), vec![0, 1, 1], params.clone(), vec![1]);
        let b = body(&m);
        let r = BindRef::parse(&b).unwrap();
        assert_eq!(r.portal_name.as_deref(), Some("p1"));
        assert_eq!(r.statement_name.as_deref(), Some("s1"));
        assert_eq!(r.parameter_format_codes.iter().collect::<Vec<_>>(), [0, 1, 1]);
        assert_eq!(r.param_count, 3);
        let got: Vec<Option<&[u8]>> = r.parameters().collect();
        assert_eq!(got, [Some(&b"42"[..]), None, Some(&b""[..])]);
        assert_eq!(r.result_column_format_codes.iter().collect::<Vec<_>>(), [1]);

        let unnamed = body(&Bind::new(None, None, vec![], vec![], vec![]));
        let r = BindRef::parse(&unnamed).unwrap();
        assert!(r.portal_name.is_none() && r.statement_name.is_none());
        assert_eq!((r.param_count, r.parameter_format_codes.len(), r.result_column_format_codes.len()), (0, 0, 0));
    }

    #[test]
    fn malformed_bind_and_execute_are_refused_not_read_past() {
        let good =
            body(&Bind::new(None, Some("s".into()), vec![1], vec![Some(bytes::Bytes::from_static(b"abcd"))], vec![]));
        for cut in 0..good.len() {
            assert!(BindRef::parse(&good[..cut]).is_err(), "truncated at {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(BindRef::parse(&trailing).is_err());
        // A parameter length below -1.
        let bad_len = [b"\0s\0".to_vec(), vec![0, 0, 0, 1], (-2i32).to_be_bytes().to_vec(), vec![0, 0]].concat();
        assert!(BindRef::parse(&bad_len).is_err());

        assert_eq!(parse_execute(b"\0\0\0\0\x05").unwrap(), (None, 5));
        assert_eq!(parse_execute(b"c1\0\0\0\0\0").unwrap(), (Some(Cow::Borrowed("c1")), 0));
        assert!(parse_execute(b"c1\0\0\0").is_err());
        assert!(parse_execute(b"c1").is_err());
    }
}
