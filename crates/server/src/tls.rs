//! TLS: a rustls server config (ring provider) from the configured PEM
//! certificate chain and key. Loaded once at startup, so a missing or bad
//! file is a startup error, not a per-connection one.

use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::ServerError;
use crate::config::TlsConfig;

pub fn load(config: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&config.cert)
        .and_then(Iterator::collect)
        .map_err(|e| ServerError::Tls(format!("certificate {}: {e}", config.cert.display())))?;
    if certs.is_empty() {
        return Err(ServerError::Tls(format!("certificate {}: no certificate in the file", config.cert.display())));
    }
    let key = PrivateKeyDer::from_pem_file(&config.key)
        .map_err(|e| ServerError::Tls(format!("private key {}: {e}", config.key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| ServerError::Tls(format!("{}: {e}", config.cert.display())))?;
    Ok(Arc::new(tls))
}
