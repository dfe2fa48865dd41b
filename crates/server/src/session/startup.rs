//! Startup, up to the first ReadyForQuery: SSL/GSS negotiation, cancel
//! requests, the startup packet and protocol version, the host rules,
//! authentication (SCRAM-SHA-256 or trust), the failure delay, the
//! connection limits (server and user), startup parameters and the
//! ParameterStatus messages that follow AuthenticationOk.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bytes::Bytes;
use pgtier_sql::SqlError;
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::PgWireFrontendMessage as F;
use pgwire::messages::startup::{Authentication, BackendKeyData, NegotiateProtocolVersion, SecretKey, Startup};

use super::{REPORTED, Session};
use crate::auth::{AuthState, Exchange, MECHANISM, ScramError, Verifier};
use crate::hba::{Client, Method};
use crate::login::Failure;
use crate::server::Shared;
use crate::wire::{ReadError, Stream, Wire};

/// PostgreSQL's authentication_timeout default.
const AUTH_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs one connection's handshake, then the session: to its end on this
/// thread, or handed to an event loop (plain TCP, when the server has
/// loops), which then owns `registered` and the connection slot. Never
/// panics on client input; every exit path closes the socket and rolls
/// back an open transaction.
pub fn serve(
    shared: &Arc<Shared>,
    tcp: std::net::TcpStream,
    pid: i32,
    secret: i32,
    cancel: Arc<AtomicBool>,
    registered: crate::server::Registered,
) {
    let remote = tcp.peer_addr().map_or_else(|_| "unknown".to_owned(), |a| a.to_string());
    let span = crate::logging::session_span(pid, &remote);
    let _entered = span.enter();
    let log = shared.log.read().clone();
    if log.connections {
        tracing::info!("connection received");
    }
    let _ = tcp.set_nodelay(true);
    let _ = tcp.set_read_timeout(Some(AUTH_TIMEOUT));
    // The host rules see IPv4 clients of an IPv6 listener as IPv4.
    let peer = tcp.peer_addr().map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |a| a.ip().to_canonical());
    let mut wire = Wire::new(Stream::Plain(tcp), shared.max_message_bytes);
    wire.log_error_detail = log.error_detail;
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
    let Some(slot) = shared.reserve_connection() else {
        return fatal(&mut wire, "53300", "sorry, too many clients already");
    };
    let database = startup.parameters.get("database").filter(|d| !d.is_empty()).unwrap_or(&user).clone();
    // This connection's rules and users, whatever a reload does meanwhile.
    let auth = shared.auth();
    let tls = matches!(wire.stream, Stream::Tls(_));
    let client = Client { addr: peer, user: &user, database: &database, tls };
    // A role made with CREATE ROLE (the configuration file's users win).
    let role = if auth.users.knows(&user) {
        None
    } else {
        pgtier_sql::catalog::roles::login_role(&shared.db.catalog(), &user)
    };
    match login(&auth, &mut wire, &client, role.as_ref()) {
        Ok(method) => {
            span.record("user", user.as_str()).record("database", database.as_str());
            if log.connections {
                tracing::info!(user, database, method, "authentication succeeded");
            }
        }
        Err(Refused::Closed) => return,
        Err(Refused::Protocol(m)) => return fatal(&mut wire, "08P01", &m),
        Err(Refused::Login(why, sqlstate, message)) => {
            // Always logged (PostgreSQL's FATAL); never what the client sent.
            tracing::warn!(user, database, remote, reason = why.label(), sqlstate, "authentication failed");
            shared.logins.failed(why, &user, peer);
            // The delay holds this handshake thread only, not a place in
            // max_connections, a session's thread or an event loop.
            drop(slot);
            std::thread::sleep(auth.failure_delay);
            return fatal(&mut wire, sqlstate, &message);
        }
    }
    // As PostgreSQL: after AuthenticationOk, LOGIN and then the role's limit.
    if role.as_ref().is_some_and(|r| !r.can_login) {
        tracing::warn!(user, database, remote, reason = "nologin", "authentication failed");
        return fatal(&mut wire, "28000", &format!("role \"{user}\" is not permitted to log in"));
    }
    let role_limit = role.as_ref().and_then(|r| usize::try_from(r.connection_limit).ok());
    let Some(user_slot) = shared.logins.join(&user, auth.connection_limit(&user).or(role_limit)) else {
        tracing::warn!(user, database, remote, reason = Failure::UserLimit.label(), "connection refused");
        shared.logins.failed(Failure::UserLimit, &user, peer);
        return fatal(&mut wire, "53300", &format!("too many connections for role \"{user}\""));
    };
    shared.logins.succeeded();
    let configured_users = !auth.users.is_empty();
    drop(auth);
    if let Stream::Plain(t) = &wire.stream {
        let _ = t.set_read_timeout(None);
    }
    if let Stream::Tls(t) = &wire.stream {
        let _ = t.sock.set_read_timeout(None);
    }
    let mut session = Session::new(shared, wire, cancel);
    session.span = span.clone();
    // Privileges are the role's; a server configured without users
    // (trust, for development) keeps every session a superuser.
    if !configured_users {
        session.conn.set_identity(&user, &database);
    } else {
        session.conn.set_login(&user, &database);
    }
    session.apply_startup_parameters(&startup, &user);
    session.wire.send(PgWireBackendMessage::BackendKeyData(BackendKeyData::new(pid, SecretKey::I32(secret))));
    session.wire.ready_for_query(b'I');
    if let Some(loops) = shared.loops.get()
        && session.raw_fd().is_some()
    {
        loops.adopt(crate::event_loop::Adopted { session, _guards: Box::new((registered, slot, user_slot)) });
        return;
    }
    session.run();
    session.finish();
    drop((slot, user_slot));
}

/// Why a connection ends before its session starts.
enum Refused {
    /// The client went away.
    Closed,
    /// It broke the protocol (08P01).
    Protocol(String),
    /// A failed login: why, SQLSTATE and PostgreSQL's message.
    Login(Failure, &'static str, String),
}

impl From<ReadError> for Refused {
    fn from(e: ReadError) -> Refused {
        match e {
            ReadError::Closed | ReadError::WouldBlock => Refused::Closed,
            ReadError::Protocol(m) => Refused::Protocol(m),
        }
    }
}

/// The first matching host rule, then its method.
fn login(
    auth: &AuthState,
    wire: &mut Wire,
    client: &Client<'_>,
    role: Option<&pgtier_sql::catalog::roles::LoginRole>,
) -> Result<&'static str, Refused> {
    let Some(rule) = auth.rules.decide(client) else {
        return Err(Refused::Login(Failure::NoRule, "28000", client.no_entry_message()));
    };
    if rule.method == Method::Reject {
        return Err(Refused::Login(Failure::Rejected, "28000", client.rejected_message()));
    }
    if rule.client_cert && !has_client_certificate(wire) {
        let message = "connection requires a valid client certificate".to_owned();
        return Err(Refused::Login(Failure::ClientCert, "28000", message));
    }
    if rule.method == Method::Trust {
        wire.send(PgWireBackendMessage::Authentication(Authentication::Ok));
        return Ok("trust");
    }
    let role_verifier = role.and_then(|r| r.verifier.as_deref()).and_then(Verifier::parse);
    if scram(auth, wire, client.user, role_verifier.as_ref())? {
        return Ok(MECHANISM);
    }
    let known = auth.users.knows(client.user) || role.is_some();
    let why = if known { Failure::Password } else { Failure::UnknownUser };
    Err(Refused::Login(why, "28P01", format!("password authentication failed for user \"{}\"", client.user)))
}

/// A TLS client whose certificate chained to `[tls] client_ca` (rustls
/// reports peer certificates only once they are verified).
fn has_client_certificate(wire: &Wire) -> bool {
    match &wire.stream {
        Stream::Tls(t) => t.conn.peer_certificates().is_some_and(|c| !c.is_empty()),
        _ => false,
    }
}

/// Sends a FATAL error and closes.
pub(super) fn fatal(wire: &mut Wire, sqlstate: &'static str, message: &str) {
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
                    wire.send(PgWireBackendMessage::NegotiateProtocolVersion(NegotiateProtocolVersion::new(
                        0, options,
                    )));
                }
                return Ok(Some(s));
            }
            _ => return Err(ReadError::Protocol("unexpected message during startup".to_owned())),
        }
    }
}

/// SCRAM-SHA-256. Ok(false): wrong password or unknown user (28P01).
fn scram(auth: &AuthState, wire: &mut Wire, user: &str, role: Option<&Verifier>) -> Result<bool, ReadError> {
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
    let (exchange, server_first) = match Exchange::start(&auth.users, user, role, &data) {
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

impl Session {
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
                self.wire.notice(
                    &SqlError::new("01000", format!("startup parameter {name} = {value:?} ignored: {}", e.message)),
                    "WARNING",
                );
            }
        }
        self.reported = REPORTED.iter().map(|(_, key)| self.conn.setting(key).unwrap_or("").to_owned()).collect();
        for (i, (name, _)) in REPORTED.iter().enumerate() {
            let value = self.reported[i].clone();
            self.wire.parameter_status(name, &value);
        }
        let standby = self.shared.replication.as_ref().is_some_and(|r| r.is_standby());
        let on_off = |on: bool| if on { "on" } else { "off" };
        // A fenced active (its lease lost) is read-only too, not a standby.
        let read_only = on_off(standby || self.shared.db.is_fenced());
        for (name, value) in [
            ("session_authorization", user),
            ("default_transaction_read_only", read_only),
            ("in_hot_standby", on_off(standby)),
        ] {
            self.wire.parameter_status(name, value);
        }
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
        assert_eq!(
            parse_options("-c search_path=x --application-name=y"),
            vec![("search_path".into(), "x".into()), ("application_name".into(), "y".into())]
        );
    }
}
