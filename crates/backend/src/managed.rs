//! A persistent cluster for humans (`pgtier backend start|stop|status|url`).
//!
//! Unlike a [`PrivateCluster`](crate::harness::PrivateCluster), this server is
//! started by `pg_ctl`, detaches from the terminal and outlives the command
//! that started it. Its directory has the same layout (see `cluster.rs`) plus
//! `pgtier-backend.json`, the remembered port, password and fsync choice
//! (mode 0600: it holds the password, like a `.pgpass`).
//!
//! It runs with [`ClusterOptions::for_benchmark`] settings, since this is the
//! PostgreSQL that benchmarks and demos measure against.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde::{Deserialize, Serialize};

use crate::binaries::find_server_binaries;
use crate::cluster::{self, Layout, StartConfig};
use crate::connect::redact_password;
use crate::error::HarnessError;
use crate::harness::ClusterOptions;
use crate::os_user::RunAs;

/// Where `pgtier backend` keeps its cluster unless told otherwise.
pub const DEFAULT_DIR: &str = ".pgtier/backend";
const STATE_FILE: &str = "pgtier-backend.json";
const PG_CTL_TIMEOUT_S: u32 = 120;
const PORT_ATTEMPTS_MAX: u32 = 5;

#[derive(Clone)]
pub struct ManagedOptions {
    pub dir: PathBuf,
    /// None = the remembered port, else a free one (then remembered).
    pub port: Option<u16>,
    pub fsync: bool,
    /// None = the remembered password, if any.
    pub password: Option<String>,
}

/// By hand: the password is shown only as present or absent.
impl std::fmt::Debug for ManagedOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagedOptions")
            .field("dir", &self.dir)
            .field("port", &self.port)
            .field("fsync", &self.fsync)
            .field("password", &redact_password(&self.password))
            .finish()
    }
}

impl ManagedOptions {
    pub fn new(dir: impl Into<PathBuf>) -> ManagedOptions {
        ManagedOptions { dir: dir.into(), port: None, fsync: true, password: None }
    }
}

#[derive(Clone, Debug)]
pub struct ManagedStart {
    pub url: String,
    pub port: u16,
    pub pid: u32,
    /// True when the server was already running and nothing was changed.
    pub already_running: bool,
}

#[derive(Clone, Debug)]
pub struct ManagedStatus {
    pub dir: PathBuf,
    pub data_dir: PathBuf,
    pub running: bool,
    pub pid: Option<u32>,
    pub port: u16,
    /// With the password, if one is set: redact before showing it.
    pub url: String,
    pub server_version: Option<String>,
    pub data_size_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopOutcome {
    Stopped { pid: u32 },
    NotRunning,
}

#[derive(Clone, Serialize, Deserialize)]
struct State {
    port: u16,
    password: Option<String>,
    fsync: bool,
}

struct Managed {
    bin_dir: PathBuf,
    run_as: RunAs,
    layout: Layout,
}

impl Managed {
    fn open(dir: &Path) -> Result<Managed, HarnessError> {
        let root = std::path::absolute(dir).map_err(|error| HarnessError::io("resolve", dir, error))?;
        let run_as = RunAs::from_env()?;
        Ok(Managed { bin_dir: find_server_binaries()?, layout: Layout::new(&root, &run_as), run_as })
    }

    fn state_path(&self) -> PathBuf {
        self.layout.root.join(STATE_FILE)
    }

    fn read_state(&self) -> Result<Option<State>, HarnessError> {
        let path = self.state_path();
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(HarnessError::io("read", &path, error)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|error| HarnessError::io("parse", &path, std::io::Error::other(error)))
    }

    fn require_state(&self) -> Result<State, HarnessError> {
        self.read_state()?.ok_or_else(|| HarnessError::NotInitialized { dir: self.layout.root.clone() })
    }

    fn write_state(&self, state: &State) -> Result<(), HarnessError> {
        let path = self.state_path();
        let text = serde_json::to_string_pretty(state)
            .map_err(|error| HarnessError::io("encode", &path, std::io::Error::other(error)))?;
        let staging = path.with_extension("json.new");
        fs::write(&staging, text).map_err(|error| HarnessError::io("write", &staging, error))?;
        fs::set_permissions(&staging, fs::Permissions::from_mode(0o600))
            .map_err(|error| HarnessError::io("chmod 0600", &staging, error))?;
        fs::rename(&staging, &path).map_err(|error| HarnessError::io("rename into place", &path, error))
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<Output, HarnessError> {
        let program = self.bin_dir.join("pg_ctl");
        self.run_as
            .command(&program)
            .args(args)
            .arg("-D")
            .arg(&self.layout.data_dir)
            .current_dir(&self.layout.root)
            .env_remove("PGDATA")
            .stdin(Stdio::null())
            .output()
            .map_err(|error| HarnessError::io("run", &program, error))
    }

    /// The postmaster's pid, if one is running on this data directory.
    fn running_pid(&self) -> Result<Option<u32>, HarnessError> {
        if !self.layout.data_dir.join("PG_VERSION").is_file() {
            return Ok(None);
        }
        let output = self.pg_ctl(&["status"])?;
        match output.status.code() {
            Some(0) => {
                let text = String::from_utf8_lossy(&output.stdout);
                Ok(parse_status_pid(&text))
            }
            // 3: not running; 4: no accessible data directory.
            Some(3 | 4) => Ok(None),
            _ => Err(command_failed("pg_ctl status", &output)),
        }
    }
}

/// Starts the managed cluster, creating it on first use. Starting a running
/// cluster changes nothing and returns its URL.
pub fn start(options: &ManagedOptions) -> Result<ManagedStart, HarnessError> {
    let managed = Managed::open(&options.dir)?;
    let remembered = managed.read_state()?;
    if let Some(pid) = managed.running_pid()? {
        let state = remembered.ok_or_else(|| {
            HarnessError::InvalidOption(format!(
                "a server (pid {pid}) runs in {} but {STATE_FILE} is missing; stop it with pg_ctl",
                managed.layout.data_dir.display()
            ))
        })?;
        return Ok(ManagedStart {
            url: cluster::url(state.port, state.password.as_deref(), "postgres"),
            port: state.port,
            pid,
            already_running: true,
        });
    }
    let password = match (&options.password, &remembered) {
        (Some(password), _) if password.is_empty() => {
            return Err(HarnessError::InvalidOption("empty password".to_owned()));
        }
        (Some(password), _) => Some(password.clone()),
        (None, Some(state)) => state.password.clone(),
        (None, None) => None,
    };
    let fixed_port = options.port.or(remembered.as_ref().map(|state| state.port));
    managed.layout.prepare(&managed.bin_dir, &managed.run_as)?;
    let settings = ClusterOptions::for_benchmark().settings;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let port = match fixed_port {
            Some(port) => port,
            None => cluster::pick_free_port()?,
        };
        let start = StartConfig {
            port,
            fsync: options.fsync,
            password_required: password.is_some(),
            settings: &settings,
            client_networks: &[],
        };
        managed.layout.write_config(&start, &managed.run_as)?;
        let timeout = PG_CTL_TIMEOUT_S.to_string();
        let log_file = path_arg(&managed.layout.log_file)?;
        let output = managed.pg_ctl(&["start", "-w", "-s", "-t", &timeout, "-l", &log_file])?;
        if !output.status.success() {
            let log_tail = managed.layout.log_tail();
            if fixed_port.is_none() && attempt < PORT_ATTEMPTS_MAX && cluster::is_port_collision(&log_tail) {
                continue;
            }
            managed.layout.remove_separate_socket_dir();
            return Err(HarnessError::StartFailed {
                reason: format!("pg_ctl start failed on port {port}: {}", output_text(&output)),
                log_file: managed.layout.log_file.clone(),
                log_tail,
            });
        }
        if let Some(password) = &password {
            managed.layout.set_password(port, password)?;
        }
        managed.write_state(&State { port, password: password.clone(), fsync: options.fsync })?;
        let pid = managed.running_pid()?.ok_or_else(|| HarnessError::StartFailed {
            reason: "pg_ctl reported a start but no server is running".to_owned(),
            log_file: managed.layout.log_file.clone(),
            log_tail: managed.layout.log_tail(),
        })?;
        return Ok(ManagedStart {
            url: cluster::url(port, password.as_deref(), "postgres"),
            port,
            pid,
            already_running: false,
        });
    }
}

/// Fast shutdown of the managed cluster in `dir`.
pub fn stop(dir: &Path) -> Result<StopOutcome, HarnessError> {
    let managed = Managed::open(dir)?;
    managed.require_state()?;
    let Some(pid) = managed.running_pid()? else {
        return Ok(StopOutcome::NotRunning);
    };
    let timeout = PG_CTL_TIMEOUT_S.to_string();
    let output = managed.pg_ctl(&["stop", "-m", "fast", "-w", "-s", "-t", &timeout])?;
    if !output.status.success() {
        return Err(HarnessError::Shutdown {
            pid,
            problem: format!("did not stop: {}", output_text(&output)),
            log_file: managed.layout.log_file.clone(),
            log_tail: managed.layout.log_tail(),
        });
    }
    managed.layout.remove_separate_socket_dir();
    Ok(StopOutcome::Stopped { pid })
}

pub fn status(dir: &Path) -> Result<ManagedStatus, HarnessError> {
    let managed = Managed::open(dir)?;
    let state = managed.require_state()?;
    let pid = managed.running_pid()?;
    let server_version = match pid {
        Some(_) => Some(managed.layout.server_version(state.port)?),
        None => None,
    };
    Ok(ManagedStatus {
        dir: managed.layout.root.clone(),
        data_dir: managed.layout.data_dir.clone(),
        running: pid.is_some(),
        pid,
        port: state.port,
        url: cluster::url(state.port, state.password.as_deref(), "postgres"),
        server_version,
        data_size_bytes: cluster::tree_size_bytes(&managed.layout.data_dir),
    })
}

/// The connection URL of the managed cluster in `dir` (running or not).
pub fn url(dir: &Path) -> Result<String, HarnessError> {
    let managed = Managed::open(dir)?;
    let state = managed.require_state()?;
    Ok(cluster::url(state.port, state.password.as_deref(), "postgres"))
}

/// "pg_ctl: server is running (PID: 1234)" -> 1234
fn parse_status_pid(text: &str) -> Option<u32> {
    let after = text.split("PID:").nth(1)?;
    after.trim_start().split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

fn path_arg(path: &Path) -> Result<String, HarnessError> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| HarnessError::InvalidOption(format!("path {} is not UTF-8", path.display())))
}

fn output_text(output: &Output) -> String {
    let mut text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !stderr.trim().is_empty() {
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(stderr.trim());
    }
    if text.is_empty() {
        text = output.status.to_string();
    }
    text.replace('\n', " ")
}

fn command_failed(program: &str, output: &Output) -> HarnessError {
    HarnessError::CommandFailed {
        program: program.to_owned(),
        status: output.status.to_string(),
        output: output_text(output),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_pid_is_parsed() {
        let text = "pg_ctl: server is running (PID: 4242)\n/usr/lib/postgresql/15/bin/postgres \"-D\" \"/x\"\n";
        assert_eq!(parse_status_pid(text), Some(4242));
        assert_eq!(parse_status_pid("pg_ctl: no server running"), None);
    }

    #[test]
    fn debug_output_hides_the_password() {
        let options = ManagedOptions { password: Some("s3cret".to_owned()), ..ManagedOptions::new("/x") };
        let shown = format!("{options:?}");
        assert!(!shown.contains("s3cret") && shown.contains("<redacted>"), "{shown}");
    }
}
