//! What a test cluster and a managed cluster share: the directory layout,
//! the configuration written at every start, readiness checks and the
//! superuser password.
//!
//! Layout of a cluster directory (`root`):
//! ```text
//! root/               0700, owned by the PostgreSQL user
//!   data/             the data directory (a copy of the initdb template)
//!   server.log        everything the server prints
//!   .s.PGSQL.<port>   the Unix socket (unless root's path is too long for one)
//! ```
//! Local (Unix-socket) connections are trusted: the socket is 0700 in a 0700
//! directory, so only the cluster's owner and root can reach it. That is how
//! the harness itself talks to the server, password or not.

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use postgres::{Config, NoTls};

use crate::connect::encode_url_component;
use crate::error::HarnessError;
use crate::os_user::RunAs;
use crate::template;

/// Longest socket directory that leaves room for "/.s.PGSQL.65535" in the
/// 108-byte `sun_path` of a Unix socket address.
const SOCKET_DIR_MAX_BYTES: usize = 90;

/// Name of the file, inside the data directory, that holds our settings. It is
/// included at the end of postgresql.conf, so it overrides initdb's defaults;
/// `ALTER SYSTEM` (postgresql.auto.conf) still overrides it.
const PGTIER_CONF: &str = "pgtier.conf";
const INCLUDE_LINE: &str = "include_if_exists = 'pgtier.conf'";

#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub root: PathBuf,
    pub data_dir: PathBuf,
    pub log_file: PathBuf,
    pub socket_dir: PathBuf,
    /// True when the socket lives outside `root` (root's path was too long)
    /// and so must be removed separately.
    pub socket_dir_is_separate: bool,
}

impl Layout {
    pub fn new(root: &Path, run_as: &RunAs) -> Layout {
        let fits = root.as_os_str().len() <= SOCKET_DIR_MAX_BYTES;
        let socket_dir = if fits {
            root.to_path_buf()
        } else {
            std::env::temp_dir().join(format!("pgtier-sock-{}-{:016x}", run_as.uid, fnv1a(root)))
        };
        Layout {
            root: root.to_path_buf(),
            data_dir: root.join("data"),
            log_file: root.join("server.log"),
            socket_dir,
            socket_dir_is_separate: !fits,
        }
    }

    /// Creates `root` for the PostgreSQL user and, when needed, the data
    /// directory from the template. Keeps an existing data directory.
    pub fn prepare(&self, bin_dir: &Path, run_as: &RunAs) -> Result<(), HarnessError> {
        fs::create_dir_all(&self.root).map_err(|error| HarnessError::io("create", &self.root, error))?;
        run_as.ensure_traversable(&self.root)?;
        run_as.chown(&self.root)?;
        fs::set_permissions(&self.root, fs::Permissions::from_mode(0o700))
            .map_err(|error| HarnessError::io("chmod 0700", &self.root, error))?;
        if self.socket_dir_is_separate {
            self.prepare_separate_socket_dir(run_as)?;
        }
        if !self.data_dir.join("PG_VERSION").is_file() {
            if self.data_dir.exists() {
                return Err(HarnessError::InvalidOption(format!(
                    "{} exists but is not a PostgreSQL data directory; remove it or choose another dir",
                    self.data_dir.display()
                )));
            }
            let template = template::template_dir(bin_dir, run_as)?;
            template::copy_template(&template, &self.data_dir)?;
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_file)
            .map_err(|error| HarnessError::io("open", &self.log_file, error))?;
        drop(log);
        // pg_ctl opens the log as the PostgreSQL user.
        run_as.chown(&self.log_file)
    }

    fn prepare_separate_socket_dir(&self, run_as: &RunAs) -> Result<(), HarnessError> {
        let dir = &self.socket_dir;
        match fs::create_dir(dir) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(HarnessError::io("create", dir, error)),
        }
        let meta = fs::symlink_metadata(dir).map_err(|error| HarnessError::io("inspect", dir, error))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        if !meta.is_dir() || (meta.uid() != run_as.uid && meta.uid() != euid) {
            return Err(HarnessError::InvalidOption(format!(
                "socket directory {} belongs to someone else; remove it",
                dir.display()
            )));
        }
        run_as.ensure_traversable(dir)?;
        run_as.chown(dir)?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|error| HarnessError::io("chmod 0700", dir, error))
    }

    pub fn remove_separate_socket_dir(&self) {
        if self.socket_dir_is_separate {
            // Best effort: an empty directory in the temp dir harms nobody.
            let _ = fs::remove_dir_all(&self.socket_dir);
        }
    }

    /// Writes pgtier.conf and pg_hba.conf for the next start.
    pub fn write_config(&self, start: &StartConfig<'_>, run_as: &RunAs) -> Result<(), HarnessError> {
        self.ensure_include_line()?;
        let conf_path = self.data_dir.join(PGTIER_CONF);
        write_owned(&conf_path, &self.conf_text(start)?, run_as)?;
        let hba_path = self.data_dir.join("pg_hba.conf");
        write_owned(&hba_path, &hba_text(start.password_required, start.client_networks)?, run_as)
    }

    fn ensure_include_line(&self) -> Result<(), HarnessError> {
        let path = self.data_dir.join("postgresql.conf");
        let text = fs::read_to_string(&path).map_err(|error| HarnessError::io("read", &path, error))?;
        if text.lines().any(|line| line.trim() == INCLUDE_LINE) {
            return Ok(());
        }
        let mut appended = text;
        if !appended.ends_with('\n') {
            appended.push('\n');
        }
        appended.push_str("\n# Added by pgtier-backend: its settings, rewritten at every start.\n");
        appended.push_str(INCLUDE_LINE);
        appended.push('\n');
        // Rewriting in place keeps the file's owner and mode.
        fs::write(&path, appended).map_err(|error| HarnessError::io("write", &path, error))
    }

    fn conf_text(&self, start: &StartConfig<'_>) -> Result<String, HarnessError> {
        let mut lines = vec![
            "# Written by pgtier-backend at every start; edits here are lost.".to_owned(),
            "# Use ALTER SYSTEM (postgresql.auto.conf) for lasting changes.".to_owned(),
        ];
        let mut base: Vec<(&str, String)> = vec![
            ("listen_addresses", "127.0.0.1".to_owned()),
            ("port", start.port.to_string()),
            ("unix_socket_directories", path_text(&self.socket_dir)?),
            ("unix_socket_permissions", "0700".to_owned()),
            ("logging_collector", "off".to_owned()),
            ("log_destination", "stderr".to_owned()),
            // Autorefresh streams changes through logical replication
            // slots, one per READONLY cache group: a test binary on the
            // shared cluster defines dozens of groups.
            ("wal_level", "logical".to_owned()),
            ("max_wal_senders", "64".to_owned()),
            ("max_replication_slots", "64".to_owned()),
        ];
        if start.fsync {
            base.push(("fsync", "on".to_owned()));
        } else {
            // Without fsync a crash of the machine loses data anyway, so the
            // other durability costs buy nothing.
            base.push(("fsync", "off".to_owned()));
            base.push(("synchronous_commit", "off".to_owned()));
            base.push(("full_page_writes", "off".to_owned()));
        }
        for (name, value) in base {
            lines.push(conf_line(name, &value)?);
        }
        for (name, value) in start.settings {
            lines.push(conf_line(name, value)?);
        }
        lines.push(String::new());
        Ok(lines.join("\n"))
    }

    /// A config for local-trust connections through the Unix socket.
    pub fn socket_config(&self, port: u16, database: &str) -> Config {
        let mut config = Config::new();
        config
            .host_path(&self.socket_dir)
            .port(port)
            .user("postgres")
            .dbname(database)
            .application_name("pgtier-backend-harness")
            .connect_timeout(Duration::from_secs(5));
        config
    }

    /// Waits until the server accepts a local connection. `still_running`
    /// is polled between attempts and returns why the server is gone, if it is.
    pub fn wait_ready(
        &self,
        port: u16,
        timeout_ms: u64,
        mut still_running: impl FnMut() -> Result<(), String> + Send,
    ) -> Result<(), String> {
        let config = self.socket_config(port, "postgres");
        off_runtime(move || {
            let deadline = Instant::now() + Duration::from_millis(timeout_ms);
            loop {
                still_running()?;
                let last_error = match config.connect(NoTls) {
                    Ok(client) => {
                        drop(client);
                        return Ok(());
                    }
                    Err(error) => error.to_string(),
                };
                if Instant::now() >= deadline {
                    return Err(format!(
                        "not accepting connections after {timeout_ms} ms (last attempt: {last_error})"
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    }

    /// Sets the superuser's password. The SCRAM verifier is computed here, so
    /// the password itself never reaches the server (nor its log).
    pub fn set_password(&self, port: u16, password: &str) -> Result<(), HarnessError> {
        let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
        let config = self.socket_config(port, "postgres");
        off_runtime(move || {
            let mut client =
                config.connect(NoTls).map_err(|error| HarnessError::sql("connecting to set the password", &error))?;
            // The verifier is base64 and '$', ':' only: safe inside a literal.
            client
                .batch_execute(&format!("ALTER ROLE postgres PASSWORD '{verifier}'"))
                .map_err(|error| HarnessError::sql("ALTER ROLE postgres PASSWORD", &error))
        })
    }

    /// `CREATE DATABASE name`, through the local socket.
    pub fn create_database(&self, port: u16, name: &str) -> Result<(), HarnessError> {
        if name.is_empty() || name.contains('\0') {
            return Err(HarnessError::InvalidOption(format!("invalid database name {name:?}")));
        }
        let statement = format!("CREATE DATABASE {}", quote_identifier(name));
        let config = self.socket_config(port, "postgres");
        off_runtime(move || {
            let mut client =
                config.connect(NoTls).map_err(|error| HarnessError::sql("connecting to create a database", &error))?;
            client.batch_execute(&statement).map_err(|error| HarnessError::sql(statement.clone(), &error))
        })
    }

    /// `SHOW server_version` through the local socket.
    pub fn server_version(&self, port: u16) -> Result<String, HarnessError> {
        let config = self.socket_config(port, "postgres");
        off_runtime(move || {
            let mut client = config
                .connect(NoTls)
                .map_err(|error| HarnessError::sql("connecting to read the server version", &error))?;
            let row = client
                .query_one("SHOW server_version", &[])
                .map_err(|error| HarnessError::sql("SHOW server_version", &error))?;
            row.try_get(0).map_err(|error| HarnessError::sql("SHOW server_version", &error))
        })
    }

    pub fn log_tail(&self) -> String {
        log_tail(&self.log_file, 30)
    }
}

/// What one start writes into the configuration.
pub(crate) struct StartConfig<'a> {
    pub port: u16,
    pub fsync: bool,
    pub password_required: bool,
    pub settings: &'a [(String, String)],
    pub client_networks: &'a [String],
}

fn hba_text(password_required: bool, client_networks: &[String]) -> Result<String, HarnessError> {
    let method = if password_required { "scram-sha-256" } else { "trust" };
    let mut text = format!(
        "# Written by pgtier-backend at every start; edits here are lost.\n\
         # The Unix socket is reachable only by the cluster owner and root.\n\
         local   all          all                   trust\n\
         local   replication  all                   trust\n\
         host    all          all   127.0.0.1/32    {method}\n\
         host    replication  all   127.0.0.1/32    {method}\n\
         host    all          all   ::1/128         {method}\n\
         host    replication  all   ::1/128         {method}\n"
    );
    for network in client_networks {
        let valid = network.split_once('/').is_some_and(|(addr, bits)| {
            addr.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 128)
        });
        if !valid {
            return Err(HarnessError::InvalidOption(format!("client network {network:?} is not an address/bits CIDR")));
        }
        text.push_str(&format!("host    all          all   {network}    {method}\n"));
        text.push_str(&format!("host    replication  all   {network}    {method}\n"));
    }
    Ok(text)
}

fn conf_line(name: &str, value: &str) -> Result<String, HarnessError> {
    let valid_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !valid_name {
        return Err(HarnessError::InvalidOption(format!("invalid setting name {name:?}")));
    }
    if value.contains(['\n', '\r', '\0']) {
        return Err(HarnessError::InvalidOption(format!("setting {name} has a line break in its value")));
    }
    let quoted = value.replace('\\', "\\\\").replace('\'', "''");
    Ok(format!("{name} = '{quoted}'"))
}

fn path_text(path: &Path) -> Result<String, HarnessError> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| HarnessError::InvalidOption(format!("path {} is not UTF-8", path.display())))
}

fn write_owned(path: &Path, text: &str, run_as: &RunAs) -> Result<(), HarnessError> {
    fs::write(path, text).map_err(|error| HarnessError::io("write", path, error))?;
    run_as.chown(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(|error| HarnessError::io("chmod 0600", path, error))
}

pub(crate) fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// postgres://postgres[:password]@127.0.0.1:PORT/DATABASE
pub(crate) fn url(port: u16, password: Option<&str>, database: &str) -> String {
    let credentials = match password {
        Some(password) => format!("postgres:{}", encode_url_component(password)),
        None => "postgres".to_owned(),
    };
    format!("postgres://{credentials}@127.0.0.1:{port}/{}", encode_url_component(database))
}

/// A loopback port nobody listens on right now. Another process may take it
/// before postgres binds it; callers retry on "Address already in use".
pub(crate) fn pick_free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .map_err(|error| HarnessError::io("bind a free port on", "127.0.0.1", error))?;
    let address =
        listener.local_addr().map_err(|error| HarnessError::io("read the address of", "127.0.0.1:0", error))?;
    Ok(address.port())
}

pub(crate) fn is_port_collision(log_tail: &str) -> bool {
    log_tail.contains("Address already in use")
}

/// The last `lines_max` lines of a log file (reading at most its last 64 KiB).
pub(crate) fn log_tail(path: &Path, lines_max: usize) -> String {
    const TAIL_BYTES_MAX: u64 = 64 * 1024;
    let Ok(mut file) = fs::File::open(path) else {
        return format!("(cannot read {})", path.display());
    };
    let length = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    let start = length.saturating_sub(TAIL_BYTES_MAX);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return format!("(cannot read {})", path.display());
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(lines_max)..];
    if tail.is_empty() {
        return "(empty)".to_owned();
    }
    tail.join("\n")
}

/// Runs `work` on a fresh thread. The sync `postgres` client panics inside a
/// Tokio runtime, and the harness is called from `#[tokio::test]`s too.
pub(crate) fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| match scope.spawn(work).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// Total size of the regular files under `dir`, not following symlinks.
pub(crate) fn tree_size_bytes(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => tree_size_bytes(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map(|meta| meta.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

fn fnv1a(path: &Path) -> u64 {
    path.as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn conf_values_are_quoted_and_names_checked() {
        assert_eq!(conf_line("work_mem", "64MB").unwrap(), "work_mem = '64MB'");
        assert_eq!(conf_line("application_name", "it's a\\b").unwrap(), "application_name = 'it''s a\\\\b'");
        assert!(conf_line("bad name", "x").is_err());
        assert!(conf_line("x", "a\nb").is_err());
    }

    #[test]
    fn client_networks_get_host_lines_and_must_be_cidrs() {
        let text = hba_text(false, &["10.213.4.2/32".to_owned()]).unwrap();
        assert!(text.contains("host    all          all   10.213.4.2/32    trust\n"), "{text}");
        assert!(text.contains("host    replication  all   10.213.4.2/32    trust\n"), "{text}");
        for bad in ["10.213.4.2", "all", "10.0.0.0/8 trust\nhost all all 0.0.0.0/0", "10.0.0.0/200"] {
            assert!(hba_text(false, &[bad.to_owned()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn long_roots_get_a_short_socket_dir() {
        let run_as = RunAs { name: "u".into(), uid: 1000, gid: 1000, switch: false };
        let short = Layout::new(Path::new("/tmp/abc"), &run_as);
        assert_eq!(short.socket_dir, Path::new("/tmp/abc"));
        let long_root = PathBuf::from(format!("/tmp/{}", "d".repeat(120)));
        let long = Layout::new(&long_root, &run_as);
        assert!(long.socket_dir_is_separate);
        assert!(long.socket_dir.as_os_str().len() <= SOCKET_DIR_MAX_BYTES);
    }
}
