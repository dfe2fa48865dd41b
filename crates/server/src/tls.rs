//! TLS with rustls (ring provider). Server side: a config from the
//! configured PEM certificate chain and key. Client side, to the backend
//! PostgreSQL: a config for `[backend] sslmode` (libpq's meanings) and the
//! SSLRequest negotiation. Both are loaded once at startup, so a missing or
//! bad file is a startup error, not a per-connection one.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use pgtier_backend::{ConnectParams, SslMode};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::ServerError;
use crate::config::TlsConfig;

pub fn load(config: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let certs = read_certs(&config.cert).map_err(|m| ServerError::Tls(format!("certificate {m}")))?;
    let key = PrivateKeyDer::from_pem_file(&config.key)
        .map_err(|e| ServerError::Tls(format!("private key {}: {e}", config.key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match config.min_version.as_deref() {
        Some("1.3") => &[&rustls::version::TLS13],
        _ => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|e| ServerError::Tls(e.to_string()))?;
    let builder = match &config.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let bad = |m: String| ServerError::Config(format!("[tls] client_ca {m}"));
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs(path).map_err(bad)? {
                roots.add(cert).map_err(|e| bad(format!("{}: {e}", path.display())))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            // "optional": checked when presented; a host rule with
            // client_cert = true then refuses a connection without one.
            let verifier = if config.client_cert.as_deref() == Some("required") {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| bad(format!("{}: {e}", path.display())))?)
        }
    };
    let tls = builder
        .with_single_cert(certs, key)
        .map_err(|e| ServerError::Tls(format!("{}: {e}", config.cert.display())))?;
    Ok(Arc::new(tls))
}

/// Every certificate in a PEM file; at least one. The error names the file.
fn read_certs(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", path.display()));
    }
    Ok(certs)
}

/// What connections to the backend do about TLS (None: `sslmode = disable`).
pub struct BackendTls {
    pub mode: SslMode,
    config: Arc<rustls::ClientConfig>,
}

/// The client config `[backend]` asks for. As in libpq: without
/// `sslrootcert` the certificate is not checked (`prefer`, `require`:
/// encryption only); with it the chain is, and `verify-full` also checks
/// that the certificate names the URL's host.
pub fn backend_client(params: &ConnectParams) -> Result<Option<BackendTls>, ServerError> {
    if params.sslmode == SslMode::Disable {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match &params.sslrootcert {
        None => Arc::new(EncryptOnly(Arc::clone(&provider))),
        Some(path) => {
            let bad = |m: String| ServerError::Config(format!("[backend] sslrootcert {m}"));
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs(path).map_err(bad)? {
                roots.add(cert).map_err(|e| bad(format!("{}: {e}", path.display())))?;
            }
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .build()
                .map_err(|e| bad(format!("{}: {e}", path.display())))?;
            if params.sslmode == SslMode::VerifyFull {
                webpki as Arc<dyn ServerCertVerifier>
            } else {
                Arc::new(ChainOnly(webpki))
            }
        }
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Some(BackendTls { mode: params.sslmode, config: Arc::new(config) }))
}

/// A TCP connection to the backend after PostgreSQL's TLS negotiation:
/// TLS, or plain when the server declines and `sslmode` is `prefer`.
pub enum Negotiated {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl BackendTls {
    /// SSLRequest, then the handshake. `host` is the URL's host name (for
    /// `verify-full`, and SNI).
    pub fn negotiate(&self, mut sock: TcpStream, host: &str) -> std::io::Result<Negotiated> {
        const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
        sock.write_all(&SSL_REQUEST)?;
        let mut answer = [0u8; 1];
        // Exactly one byte: anything after 'S' must be the TLS handshake,
        // never plaintext read before it (CVE-2021-23222).
        sock.read_exact(&mut answer)?;
        match answer[0] {
            b'S' => {}
            b'N' if self.mode == SslMode::Prefer => return Ok(Negotiated::Plain(sock)),
            b'N' => {
                return Err(failed(format!(
                    "the server does not support SSL, but [backend] sslmode is \"{}\"",
                    self.mode.name()
                )));
            }
            other => return Err(failed(format!("unexpected answer {other:#04x} to SSLRequest"))),
        }
        let name = ServerName::try_from(host.to_owned()).map_err(|e| failed(format!("host {host}: {e}")))?;
        let mut conn =
            rustls::ClientConnection::new(Arc::clone(&self.config), name).map_err(|e| failed(format!("TLS: {e}")))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock).map_err(|e| failed(format!("TLS handshake: {e}")))?;
        }
        Ok(Negotiated::Tls(Box::new(rustls::StreamOwned::new(conn, sock))))
    }
}

fn failed(m: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionRefused, m)
}

/// `prefer`/`require` without `sslrootcert`: any certificate (libpq's
/// behaviour); signatures are still checked, so the session key is the
/// certificate holder's.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca` (and `prefer`/`require` with `sslrootcert`): the chain must
/// lead to `sslrootcert`, the name may differ. WebPkiServerVerifier checks
/// the chain before the name, so a name error means the chain was good.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
