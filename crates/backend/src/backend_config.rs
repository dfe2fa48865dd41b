//! `[backend]`: the one PostgreSQL pgtier sits in front of, named once in
//! the configuration (DESIGN.md §3, "Configuration and origins").
//! Passthrough, loading, write-through and autorefresh all connect with the
//! [`ConnectParams`] that [`BackendConfig::resolve`] returns.
//!
//! The password comes from the URL, a file or an environment variable; it
//! is read once, at startup, so a missing file or variable stops pgtier
//! before it listens. It is never printed: the Debug impls leave it out and
//! every message shows the URL through [`redact_url`].

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::connect::{error_chain, redact_url};

/// Backend connections a pgtier process keeps when `pool_size` is not set.
pub const POOL_SIZE_DEFAULT: usize = 4;

/// `[backend]` as written in the configuration file.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    /// `postgresql://user@host:port/db`. A password in it works, but not
    /// together with `password_file` or `password_env`.
    pub url: Option<String>,
    /// A file holding the password (one trailing newline is ignored); like
    /// libpq's password and key files, it must not be readable by others.
    pub password_file: Option<PathBuf>,
    /// An environment variable holding the password.
    pub password_env: Option<String>,
    /// TLS to the backend; libpq's names and meanings. Default `prefer`.
    pub sslmode: Option<SslMode>,
    /// PEM file of the CA certificate(s) the backend's certificate must
    /// chain to. Required by `verify-ca` and `verify-full`; with `prefer`
    /// or `require` it makes the chain checked too (as libpq does).
    pub sslrootcert: Option<PathBuf>,
    /// Connections to the backend, shared by all sessions.
    pub pool_size: Option<usize>,
}

impl fmt::Debug for BackendConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password; the other fields only say where one is.
        f.debug_struct("BackendConfig")
            .field("url", &self.url.as_deref().map(redact_url))
            .field("password_file", &self.password_file)
            .field("password_env", &self.password_env)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

/// libpq's `sslmode` values (`allow` is not offered: it only ever matters
/// for a server that requires TLS, where `prefer` does the same).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS when the server offers it, else plain.
    #[default]
    Prefer,
    /// TLS or no connection; the certificate is checked only when
    /// `sslrootcert` is set.
    Require,
    /// TLS, certificate chained to `sslrootcert`.
    VerifyCa,
    /// As `verify-ca`, and the certificate names the host in the URL.
    VerifyFull,
}

impl SslMode {
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// One line saying what is wrong with `[backend]`; never contains a password.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BackendConfigError(String);

fn invalid(message: impl Into<String>) -> BackendConfigError {
    BackendConfigError(message.into())
}

/// Everything a connection to the backend needs, the password included.
#[derive(Clone)]
pub struct ConnectParams {
    /// The URL parsed, with the password from whichever source set.
    pub config: postgres::Config,
    /// The URL without its password, for messages.
    pub shown: String,
    /// Where the password comes from ("[backend] password_file /run/x"),
    /// for hints after a failed login; None without a password.
    pub password_source: Option<String>,
    pub sslmode: SslMode,
    pub sslrootcert: Option<PathBuf>,
    pub pool_size: usize,
}

impl fmt::Debug for ConnectParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectParams")
            .field("url", &self.shown)
            .field("password_source", &self.password_source)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

impl BackendConfig {
    /// Checks the section and reads the password from its file or variable.
    pub fn resolve(&self) -> Result<ConnectParams, BackendConfigError> {
        let url = self.url.as_deref().ok_or_else(|| invalid("[backend] url is missing"))?;
        let shown = redact_url(url);
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(invalid(format!("[backend] url {shown} must be a postgres:// or postgresql:// URL")));
        }
        if let Some(key) = tls_key_in_url(url) {
            return Err(invalid(format!(
                "[backend] url {shown}: set {key} as its own key in [backend], not in the URL"
            )));
        }
        let mut config: postgres::Config =
            url.parse().map_err(|e: postgres::Error| invalid(format!("[backend] url {shown}: {}", error_chain(&e))))?;
        let source = match (&self.password_file, &self.password_env) {
            (Some(_), Some(_)) => return Err(invalid("[backend] sets both password_file and password_env; keep one")),
            (Some(path), None) => Some(format!("[backend] password_file {}", path.display())),
            (None, Some(var)) => Some(format!("[backend] password_env {var}")),
            (None, None) => None,
        };
        if let Some(source) = &source
            && config.get_password().is_some()
        {
            return Err(invalid(format!(
                "[backend] url {shown} carries a password and {source} is set too; remove the password from the URL"
            )));
        }
        let password = match (&self.password_file, &self.password_env) {
            (Some(path), _) => Some(read_password_file(path)?),
            (None, Some(var)) => Some(read_password_env(var)?),
            (None, None) => None,
        };
        if let Some(password) = password {
            config.password(password);
        }
        let password_source = source.or_else(|| config.get_password().map(|_| "the [backend] url".to_owned()));
        let sslmode = self.sslmode.unwrap_or_default();
        if matches!(sslmode, SslMode::VerifyCa | SslMode::VerifyFull) && self.sslrootcert.is_none() {
            return Err(invalid(format!(
                "[backend] sslmode \"{}\" needs sslrootcert: the CA certificate (PEM) PostgreSQL's certificate is signed by",
                sslmode.name()
            )));
        }
        let pool_size = self.pool_size.unwrap_or(POOL_SIZE_DEFAULT);
        if pool_size == 0 {
            return Err(invalid("[backend] pool_size must be at least 1"));
        }
        Ok(ConnectParams { config, shown, password_source, sslmode, sslrootcert: self.sslrootcert.clone(), pool_size })
    }
}

/// `sslmode` or `sslrootcert` among the URL's parameters: they have keys of
/// their own, and the URL parser knows only some of libpq's values.
fn tls_key_in_url(url: &str) -> Option<&'static str> {
    let (_, query) = url.split_once('?')?;
    query.split('&').find_map(|param| {
        let key = param.split_once('=').map_or(param, |(k, _)| k);
        ["sslmode", "sslrootcert"].into_iter().find(|k| key.eq_ignore_ascii_case(k))
    })
}

/// The password in `path`, without trailing line breaks. Refused when
/// others may read it, by libpq's rule for private key files: at most
/// u=rw (0600), or u=rw,g=r (0640) for a file owned by root (a secret
/// mounted for a group).
fn read_password_file(path: &Path) -> Result<Vec<u8>, BackendConfigError> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| invalid(format!("[backend] password_file {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(invalid(format!("[backend] password_file {shown} is not a regular file")));
    }
    let mode = meta.mode() & 0o777;
    let forbidden = if meta.uid() == 0 { 0o037 } else { 0o077 };
    if mode & forbidden != 0 {
        return Err(invalid(format!(
            "[backend] password_file {shown} has group or world access (mode {mode:04o}); \
             it must be u=rw (0600) or less, or u=rw,g=r (0640) or less if owned by root"
        )));
    }
    let mut bytes = std::fs::read(path).map_err(|e| invalid(format!("[backend] password_file {shown}: {e}")))?;
    while matches!(bytes.last(), Some(b'\n' | b'\r')) {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(invalid(format!("[backend] password_file {shown} is empty")));
    }
    Ok(bytes)
}

fn read_password_env(var: &str) -> Result<Vec<u8>, BackendConfigError> {
    use std::os::unix::ffi::OsStringExt;
    match std::env::var_os(var) {
        None => Err(invalid(format!("[backend] password_env: environment variable {var} is not set"))),
        Some(value) if value.is_empty() => {
            Err(invalid(format!("[backend] password_env: environment variable {var} is empty")))
        }
        Some(value) => Ok(value.into_vec()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const SECRET: &str = "hunter2-backend-config";

    fn file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    fn config(url: &str) -> BackendConfig {
        BackendConfig { url: Some(url.to_owned()), ..BackendConfig::default() }
    }

    fn error(c: &BackendConfig) -> String {
        let e = c.resolve().err().unwrap().to_string();
        assert!(!e.contains(SECRET) && !e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn password_file_is_read_trimmed_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config("postgresql://app@db:5432/app");
        c.password_file = Some(file(dir.path(), "pw", &format!("{SECRET}\r\n"), 0o600));
        let p = c.resolve().unwrap();
        assert_eq!(p.config.get_password(), Some(SECRET.as_bytes()));
        assert_eq!((p.sslmode, p.pool_size), (SslMode::Prefer, POOL_SIZE_DEFAULT));
        for shown in [format!("{c:?}"), format!("{p:?}")] {
            assert!(!shown.contains(SECRET), "{shown}");
        }
        assert!(p.password_source.unwrap().contains("password_file"));
    }

    #[test]
    fn password_files_others_may_read_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config("postgresql://app@db/app");
        for mode in [0o604, 0o644, 0o660, 0o606] {
            c.password_file = Some(file(dir.path(), "pw", SECRET, mode));
            assert!(error(&c).contains("group or world access"), "{mode:o}");
        }
        c.password_file = Some(file(dir.path(), "empty", "\n", 0o600));
        assert!(error(&c).contains("is empty"));
        c.password_file = Some(dir.path().to_owned());
        assert!(error(&c).contains("not a regular file"));
        c.password_file = Some(dir.path().join("missing"));
        assert!(error(&c).contains("No such file"));
    }

    #[test]
    fn one_password_source_only() {
        let dir = tempfile::tempdir().unwrap();
        let pw = file(dir.path(), "pw", SECRET, 0o600);
        let mut c = config(&format!("postgresql://app:{SECRET}@db/app"));
        assert_eq!(c.resolve().unwrap().password_source.as_deref(), Some("the [backend] url"));
        c.password_file = Some(pw.clone());
        assert!(error(&c).contains("carries a password and [backend] password_file"));
        let mut c = config("postgresql://app@db/app");
        c.password_file = Some(pw);
        c.password_env = Some("PGTIER_UNSET_VARIABLE_FOR_TESTS".to_owned());
        assert!(error(&c).contains("both password_file and password_env"));
        c.password_file = None;
        assert!(error(&c).contains("PGTIER_UNSET_VARIABLE_FOR_TESTS is not set"));
    }

    #[test]
    fn urls_and_tls_settings_are_checked() {
        assert!(error(&BackendConfig::default()).contains("url is missing"));
        assert!(error(&config(&format!("host=db password={SECRET}"))).contains("must be a postgres://"));
        assert!(
            error(&config(&format!("postgresql://app:{SECRET}@db:notaport/app"))).contains("postgresql://app:***@db")
        );
        assert!(error(&config("postgresql://app@db/app?sslmode=require")).contains("set sslmode as its own key"));
        let mut c = config("postgresql://app@db/app");
        c.sslmode = Some(SslMode::VerifyFull);
        assert!(error(&c).contains("needs sslrootcert"));
        c.sslrootcert = Some("ca.pem".into());
        assert_eq!(c.resolve().unwrap().sslmode, SslMode::VerifyFull);
        c.pool_size = Some(0);
        assert!(error(&c).contains("pool_size"));
    }
}
