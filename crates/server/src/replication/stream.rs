//! The replication connection: frames, the active's sender and the
//! standby's receiver.
//!
//! ```text
//! standby → active  hello: "PGTREPL2" [incarnation: 32 hex digits] [start lsn u64]
//!                          [last record lsn u64] [its checksum u32]  (0, 0: no record)
//!                   'A' [durable end u64]            after each burst applied and synced
//! active → standby  'W' [lsn u64] [len u32] [record]  each durable record, in order
//!                   'K' [durable end u64] [n u32] ([len u16][name][position u64])*
//!                       every 200 ms: the active's end and its consumers' positions
//!                   'E' [len u32] [message]           refusal (another directory, WAL gone)
//! ```
//! All integers little-endian. A frame's body is bounded (`FRAME_BYTES_MAX`,
//! above the WAL's largest record); buffers are the sockets' (64 KiB).

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgtier_engine::{Lsn, StreamStart};

use super::{RETRY, Replication};

const HELLO: &[u8; 8] = b"PGTREPL2";
/// The active's consumer that keeps the WAL its standby still needs.
pub(crate) const STANDBY_CONSUMER: &str = "standby";
const FRAME_BYTES_MAX: usize = 64 << 20;
const IO_BYTES: usize = 64 << 10;
/// A standby's mirror of the active's consumer positions is persisted at
/// most this often (each is an fsync).
const MIRROR_EVERY: Duration = Duration::from_secs(1);

type Io<T> = std::io::Result<T>;

fn bad(message: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message.into())
}

fn read_u64(r: &mut impl Read) -> Io<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn read_u32(r: &mut impl Read) -> Io<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_body(r: &mut impl Read, len: usize) -> Io<Vec<u8>> {
    if len > FRAME_BYTES_MAX {
        return Err(bad(format!("replication frame of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// The active: one standby connection at a time is served (a second one
/// waits until the first ends).
pub(super) fn listen(repl: &Arc<Replication>, listener: TcpListener) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    while !repl.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((sock, peer)) => {
                let _ = sock.set_nonblocking(false);
                tracing::info!(%peer, "replication: standby connected");
                if let Err(e) = serve(repl, sock) {
                    tracing::warn!(%peer, error = %e, "replication: standby connection ended");
                }
                repl.connected.store(false, Ordering::Release);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn serve(repl: &Arc<Replication>, sock: TcpStream) -> Io<()> {
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut hello = [0u8; 8 + 32 + 8 + 8 + 4];
    (&sock).read_exact(&mut hello)?;
    let mut out = BufWriter::with_capacity(IO_BYTES, sock.try_clone()?);
    if &hello[..8] != HELLO {
        return Err(bad("not a pgtier standby"));
    }
    let id = String::from_utf8_lossy(&hello[8..40]).into_owned();
    let u64_at = |at: usize| u64::from_le_bytes(hello[at..at + 8].try_into().unwrap_or_default());
    let start = Lsn(u64_at(40));
    let last_record = Lsn(u64_at(48));
    let last_checksum = u32::from_le_bytes(hello[56..60].try_into().unwrap_or_default());
    let refuse = |out: &mut BufWriter<TcpStream>, message: String| -> Io<()> {
        out.write_all(b"E")?;
        out.write_all(&(message.len() as u32).to_le_bytes())?;
        out.write_all(message.as_bytes())?;
        out.flush()?;
        Err(bad(message))
    };
    if id != repl.db.incarnation().id {
        let message = format!(
            "the standby's directory (incarnation {id}) is not this active's ({}): seed it with pgtier backup and pgtier restore --standby",
            repl.db.incarnation().id
        );
        return refuse(&mut out, message);
    }
    if start > repl.db.wal_end() {
        return refuse(
            &mut out,
            format!("the standby's log ends at {} after this active's: histories differ", start.0),
        );
    }
    if let Some(message) = history_differs(repl, start, last_record, last_checksum) {
        return refuse(&mut out, message);
    }
    // From now on write-through sends PostgreSQL only what this standby
    // has (a promoted standby's was unlimited until its first standby).
    repl.awt_limit.fetch_min(start.0, Ordering::AcqRel);
    // Registered where the standby stands: the WAL it needs is kept.
    let registered = repl.db.register_consumer(STANDBY_CONSUMER, StreamStart::At(start));
    let reader = match registered.and_then(|()| repl.db.wal_reader(start)) {
        Ok(r) => r,
        Err(e) => return refuse(&mut out, format!("cannot stream from {}: {e} (re-seed the standby)", start.0)),
    };
    repl.connected.store(true, Ordering::Release);
    sock.set_read_timeout(None)?;
    let acks = {
        let repl = Arc::clone(repl);
        let sock = sock.try_clone()?;
        std::thread::Builder::new().name("pgtier-repl-acks".into()).spawn(move || read_acks(&repl, sock))?
    };
    let r = send(repl, reader, &mut out);
    let _ = sock.shutdown(std::net::Shutdown::Both);
    let _ = acks.join();
    r
}

/// Why a standby whose log ends at `start` with the record `last_record`
/// (checksum `last_checksum`) cannot follow this active: its last record is
/// not the one this log holds there. An old active restarted as the
/// standby of the member that took over has the same history up to the
/// failover, but may hold commits after it the new active never received
/// (async mode, or a sync commit cut off before its acknowledgement) where
/// the new active logged others: streamed on from its end, its data would
/// silently differ. Comparing the last record (checksums cover payload and
/// position) catches that; the histories before it are both the pair's.
fn history_differs(repl: &Replication, start: Lsn, last_record: Lsn, last_checksum: u32) -> Option<String> {
    if last_record.0 == 0 {
        return None;
    }
    let reseed = "re-seed it with pgtier backup on this active and pgtier restore --standby";
    match repl.db.wal_record_checksum_at(last_record) {
        Ok(Some(checksum)) if checksum == last_checksum && last_record < start => None,
        Ok(_) => Some(format!(
            "the standby's log differs from this active's at {}: it holds commits this active never received (histories diverged at a failover); {reseed}",
            last_record.0
        )),
        Err(e) => Some(format!("cannot check the standby's history at {}: {e}; {reseed}", last_record.0)),
    }
}

fn send(repl: &Replication, mut reader: pgtier_engine::WalReader, out: &mut BufWriter<TcpStream>) -> Io<()> {
    // The first keepalive at once: it tells the standby it is following
    // (the lease's waiter starts then) and where the active stands.
    write_keepalive(repl, out)?;
    let mut keepalive = Instant::now();
    while !repl.stop.load(Ordering::Acquire) {
        let mut sent = false;
        for next in reader.by_ref() {
            let (lsn, payload) = next.map_err(|e| bad(e.to_string()))?;
            out.write_all(b"W")?;
            out.write_all(&lsn.0.to_le_bytes())?;
            out.write_all(&(payload.len() as u32).to_le_bytes())?;
            out.write_all(&payload)?;
            sent = true;
        }
        if sent {
            out.flush()?;
            repl.note_sent(reader.position().0);
        }
        if keepalive.elapsed() >= RETRY {
            keepalive = Instant::now();
            write_keepalive(repl, out)?;
        }
        repl.db.wait_wal_durable_beyond(reader.position(), RETRY);
    }
    Ok(())
}

fn write_keepalive(repl: &Replication, out: &mut BufWriter<TcpStream>) -> Io<()> {
    // The end before the list: a consumer missing from the list registers
    // later, at the WAL's end then, which is past this end (the standby
    // relies on it: `mirror_consumers`).
    let durable_end = repl.db.wal_durable_end();
    let consumers: Vec<_> = repl.db.consumers().into_iter().filter(|c| c.name != STANDBY_CONSUMER).collect();
    out.write_all(b"K")?;
    out.write_all(&durable_end.0.to_le_bytes())?;
    out.write_all(&(consumers.len() as u32).to_le_bytes())?;
    for c in consumers {
        out.write_all(&(c.name.len() as u16).to_le_bytes())?;
        out.write_all(c.name.as_bytes())?;
        out.write_all(&c.position.0.to_le_bytes())?;
    }
    out.flush()
}

fn read_acks(repl: &Replication, sock: TcpStream) {
    let mut input = BufReader::new(sock);
    let mut persisted = Instant::now();
    loop {
        let mut tag = [0u8; 1];
        if input.read_exact(&mut tag).is_err() || tag[0] != b'A' {
            return;
        }
        let Ok(end) = read_u64(&mut input) else { return };
        repl.note_ack(end);
        if persisted.elapsed() >= MIRROR_EVERY {
            persisted = Instant::now();
            // Never past what is durable here (the standby's end is not).
            let at = Lsn(end.min(repl.db.wal_durable_end().0));
            if let Err(e) = repl.db.ack_consumer(STANDBY_CONSUMER, at) {
                tracing::warn!(error = %e, "replication: cannot record the standby's position");
            }
        }
    }
}

/// The standby: connect, receive, apply, acknowledge; reconnect after a
/// broken connection. A record the engine refuses (another history) stops
/// replication for good, loudly.
pub(super) fn receive_loop(repl: &Arc<Replication>, primary: &str) {
    let mut mirrored = Instant::now();
    while !repl.stop.load(Ordering::Acquire) {
        // A fresh applier per connection: a run cut by the broken one is
        // sent again from its start.
        let mut applier = repl.db.replica_applier();
        match receive(repl, primary, &mut applier, &mut mirrored) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                tracing::error!(error = %e, "replication: stopped; the standby is not following its active");
                repl.connected.store(false, Ordering::Release);
                return;
            }
            Err(e) => {
                if repl.connected.swap(false, Ordering::AcqRel) {
                    tracing::warn!(error = %e, "replication: connection to the active lost; retrying");
                }
            }
        }
        std::thread::sleep(RETRY);
    }
}

fn receive(
    repl: &Replication,
    primary: &str,
    applier: &mut pgtier_engine::ReplicaApplier,
    mirrored: &mut Instant,
) -> Io<()> {
    let sock = TcpStream::connect(primary)?;
    sock.set_nodelay(true)?;
    *repl.socket.lock() = Some(sock.try_clone()?);
    if repl.stop.load(Ordering::Acquire) {
        return Ok(());
    }
    let mut out = BufWriter::new(sock.try_clone()?);
    // Where this log's history ends, for the active to check it is its own.
    let (last_record, last_checksum) = repl.db.wal_last_record().map_err(|e| bad(e.to_string()))?.unwrap_or_default();
    out.write_all(HELLO)?;
    out.write_all(repl.db.incarnation().id.as_bytes())?;
    out.write_all(&applier.wal_end().0.to_le_bytes())?;
    out.write_all(&last_record.0.to_le_bytes())?;
    out.write_all(&last_checksum.to_le_bytes())?;
    out.flush()?;
    let mut input = BufReader::with_capacity(IO_BYTES, sock);
    repl.connected.store(true, Ordering::Release);
    let mut first_active_end: Option<u64> = None;
    loop {
        let mut tag = [0u8; 1];
        input.read_exact(&mut tag)?;
        match tag[0] {
            b'W' => {
                let lsn = Lsn(read_u64(&mut input)?);
                let len = read_u32(&mut input)? as usize;
                let payload = read_body(&mut input, len)?;
                applier.push(lsn, payload).map_err(|e| bad(format!("applying the record at {}: {e}", lsn.0)))?;
            }
            b'K' => {
                let active_end = read_u64(&mut input)?;
                repl.active_end.store(active_end, Ordering::Release);
                // Following once caught up with the active's end as first
                // heard on this connection (sent before any record): what
                // its write-through sent PostgreSQL before this standby
                // connected is here then.
                let caught_up_to = *first_active_end.get_or_insert(active_end);
                if let Some(failover) = &repl.failover
                    && !failover.followed.load(Ordering::Acquire)
                    && applier.sync().map_err(|e| bad(e.to_string()))?.0 >= caught_up_to
                {
                    failover.followed.store(true, Ordering::Release);
                }
                let n = read_u32(&mut input)?;
                let mut positions = Vec::new();
                for _ in 0..n.min(1024) {
                    let mut len = [0u8; 2];
                    input.read_exact(&mut len)?;
                    let name = String::from_utf8_lossy(&read_body(&mut input, usize::from(u16::from_le_bytes(len)))?)
                        .into_owned();
                    positions.push((name, Lsn(read_u64(&mut input)?)));
                }
                let heard = ActiveConsumers { end: Lsn(active_end), positions };
                // At once the first time (a promotion right after the
                // seed must find the positions), then at most every second.
                let first = repl.last_consumers.lock().is_none();
                if first || mirrored.elapsed() >= MIRROR_EVERY {
                    *mirrored = Instant::now();
                    mirror_consumers(repl, &heard);
                }
                *repl.last_consumers.lock() = Some(heard);
            }
            b'E' => {
                let len = read_u32(&mut input)? as usize;
                let message = String::from_utf8_lossy(&read_body(&mut input, len)?).into_owned();
                return Err(bad(format!("the active refused: {message}")));
            }
            other => return Err(bad(format!("unknown replication frame {other}"))),
        }
        // A burst ends when nothing more is buffered: make it durable, ack.
        if input.buffer().is_empty() {
            let end = applier.sync().map_err(|e| bad(e.to_string()))?;
            out.write_all(b"A")?;
            out.write_all(&end.0.to_le_bytes())?;
            out.flush()?;
        }
    }
}

/// What a keepalive says of the active's consumers: their positions, and
/// the active's durable end read before them.
pub(crate) struct ActiveConsumers {
    pub end: Lsn,
    pub positions: Vec<(String, Lsn)>,
}

/// Keeps the active's consumers (AWT's) on the standby at positions no
/// later than the active's and within its own durable log, so the WAL a
/// promoted standby's consumers need is kept and they resume where the
/// active's stood. A consumer of the standby's own the active does not
/// list (AWT's, registered from the start: `Replication::new`) moves to
/// the active's end as heard: should the active register it after this
/// keepalive, it starts past that end, so nothing before it is for that
/// consumer; until a keepalive comes the standby keeps all its WAL for it.
pub(super) fn mirror_consumers(repl: &Replication, heard: &ActiveConsumers) {
    let durable = repl.db.wal_durable_end();
    let listed = |name: &str| heard.positions.iter().any(|(n, _)| n == name);
    let unlisted = repl
        .db
        .consumers()
        .into_iter()
        .filter(|c| c.name != STANDBY_CONSUMER && !listed(&c.name))
        .map(|c| (c.name, heard.end));
    for (name, position) in heard.positions.iter().cloned().chain(unlisted) {
        let at = Lsn(position.0.min(durable.0));
        let r = repl.db.register_consumer(&name, StreamStart::At(at)).and_then(|()| repl.db.ack_consumer(&name, at));
        if let Err(e) = r {
            tracing::warn!(consumer = %name, error = %e, "replication: cannot mirror a consumer position");
        }
    }
}
