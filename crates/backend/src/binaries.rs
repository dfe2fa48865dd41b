//! Finding the PostgreSQL server binaries (initdb, postgres, pg_ctl).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::HarnessError;

/// The programs a directory must hold to count as a server binary directory.
const REQUIRED: [&str; 3] = ["initdb", "postgres", "pg_ctl"];

/// Where Debian and Ubuntu install one directory per major version.
pub const DEBIAN_VERSIONS_ROOT: &str = "/usr/lib/postgresql";

/// The directory holding initdb, postgres and pg_ctl: `PGTIER_PG_BIN` if set,
/// else the directory of `pg_ctl` on `PATH`, else the newest
/// `/usr/lib/postgresql/*/bin`.
pub fn find_server_binaries() -> Result<PathBuf, HarnessError> {
    let override_dir = std::env::var_os("PGTIER_PG_BIN");
    let path_var = std::env::var_os("PATH");
    find_server_binaries_from(
        override_dir.as_deref().map(Path::new),
        path_var.as_deref(),
        Path::new(DEBIAN_VERSIONS_ROOT),
    )
}

/// [`find_server_binaries`] with its inputs explicit, so tests need not touch
/// process-global environment variables. An override that does not hold the
/// binaries is an error, not a reason to fall back: the user asked for it.
pub fn find_server_binaries_from(
    override_dir: Option<&Path>,
    path_var: Option<&OsStr>,
    versions_root: &Path,
) -> Result<PathBuf, HarnessError> {
    if let Some(dir) = override_dir.filter(|dir| !dir.as_os_str().is_empty()) {
        if holds_server_binaries(dir) {
            return Ok(dir.to_path_buf());
        }
        return Err(HarnessError::BinariesNotFound {
            searched: format!("PGTIER_PG_BIN={} does not contain executable {}", dir.display(), REQUIRED.join(", ")),
        });
    }
    if let Some(path_var) = path_var {
        for entry in std::env::split_paths(path_var) {
            let pg_ctl = entry.join("pg_ctl");
            if !is_executable(&pg_ctl) {
                continue;
            }
            // /usr/local/bin/pg_ctl is often a symlink into the real version
            // directory; initdb and postgres must come from that same place.
            let real_dir = std::fs::canonicalize(&pg_ctl).ok().and_then(|real| real.parent().map(Path::to_path_buf));
            for dir in real_dir.into_iter().chain(std::iter::once(entry)) {
                if holds_server_binaries(&dir) {
                    return Ok(dir);
                }
            }
        }
    }
    if let Some(dir) = newest_version_dir(versions_root) {
        return Ok(dir);
    }
    Err(HarnessError::BinariesNotFound {
        searched: format!(
            "PGTIER_PG_BIN is unset, no pg_ctl with initdb and postgres beside it on PATH, nothing in {}/*/bin",
            versions_root.display()
        ),
    })
}

fn holds_server_binaries(dir: &Path) -> bool {
    REQUIRED.iter().all(|program| is_executable(&dir.join(program)))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

fn newest_version_dir(versions_root: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(versions_root).ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let bin = entry.path().join("bin");
            holds_server_binaries(&bin).then(|| (version_key(&name), bin))
        })
        .max_by(|left, right| left.0.cmp(&right.0))
        .map(|(_, bin)| bin)
}

/// "9.6" < "15" < "16": numeric components compared as numbers.
fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .map(|part| part.parse().unwrap_or(0))
        .collect()
}

/// The server's version, e.g. "15.18", from `postgres --version`.
pub(crate) fn server_version(bin_dir: &Path) -> Result<String, HarnessError> {
    let program = bin_dir.join("postgres");
    // `--version` is answered before postgres's refuse-to-run-as-root check.
    let output =
        Command::new(&program).arg("--version").output().map_err(|error| HarnessError::io("run", &program, error))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .split_whitespace()
        .skip_while(|word| *word != "(PostgreSQL)")
        .nth(1)
        .or_else(|| text.split_whitespace().nth(2))
        .map(|word| word.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '.').collect::<String>())
        .filter(|version| !version.is_empty());
    match (output.status.success(), version) {
        (true, Some(version)) => Ok(version),
        _ => Err(HarnessError::CommandFailed {
            program: format!("{} --version", program.display()),
            status: output.status.to_string(),
            output: text.trim().to_owned(),
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn version_order_is_numeric() {
        assert!(version_key("9.6") < version_key("15"));
        assert!(version_key("15") < version_key("16"));
    }
}
