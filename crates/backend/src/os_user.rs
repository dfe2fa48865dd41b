//! Which OS user runs initdb, postgres and pg_ctl.
//!
//! PostgreSQL refuses to run as root. When we are root we switch to an
//! unprivileged user for every PostgreSQL program, hand it the cluster's files,
//! and make sure it can reach them. When we are not root we run as ourselves.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::error::HarnessError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// True when we are root and must drop to `uid`/`gid` for PostgreSQL.
    pub switch: bool,
}

impl RunAs {
    /// Resolves the user from the environment: `PGTIER_PG_USER`, else `postgres`.
    pub fn from_env() -> Result<RunAs, HarnessError> {
        let requested = std::env::var("PGTIER_PG_USER").ok().filter(|name| !name.is_empty());
        RunAs::resolve(requested.as_deref())
    }

    pub fn resolve(requested: Option<&str>) -> Result<RunAs, HarnessError> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 {
            // SAFETY: as above.
            let gid = unsafe { libc::getegid() };
            return Ok(RunAs { name: current_user_name(euid), uid: euid, gid, switch: false });
        }
        let name = requested.unwrap_or("postgres");
        let (uid, gid) = lookup_user(name).ok_or_else(|| HarnessError::NoUnprivilegedUser {
            detail: match requested {
                Some(name) => format!("PGTIER_PG_USER={name} is not a known user"),
                None => "user `postgres` does not exist".to_owned(),
            },
        })?;
        if uid == 0 {
            return Err(HarnessError::NoUnprivilegedUser { detail: format!("user `{name}` has uid 0") });
        }
        Ok(RunAs { name: name.to_owned(), uid, gid, switch: true })
    }

    /// A command that runs as this user.
    pub fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        if self.switch {
            // std drops supplementary groups and applies gid, then uid, in the child
            // before any pre_exec closure runs.
            command.uid(self.uid).gid(self.gid);
        }
        command
    }

    /// Gives `path` to this user (no-op unless we switch users).
    pub fn chown(&self, path: &Path) -> Result<(), HarnessError> {
        if !self.switch {
            return Ok(());
        }
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid))
            .map_err(|error| HarnessError::io("chown", path, error))
    }

    /// Makes every ancestor of `path` searchable by this user. Temp dirs are
    /// 0700 root by default, and postgres cannot open a data directory it
    /// cannot walk to; we add only the search bit (o+x), never read.
    pub fn ensure_traversable(&self, path: &Path) -> Result<(), HarnessError> {
        if !self.switch {
            return Ok(());
        }
        for ancestor in path.ancestors().skip(1) {
            if ancestor.as_os_str().is_empty() {
                continue;
            }
            let meta = fs::metadata(ancestor).map_err(|error| HarnessError::io("inspect", ancestor, error))?;
            let mode = meta.permissions().mode();
            let searchable = (meta.uid() == self.uid && mode & 0o100 != 0)
                || (meta.gid() == self.gid && mode & 0o010 != 0)
                || mode & 0o001 != 0;
            if !searchable {
                fs::set_permissions(ancestor, fs::Permissions::from_mode((mode & 0o7777) | 0o001))
                    .map_err(|error| HarnessError::io("make searchable", ancestor, error))?;
            }
        }
        Ok(())
    }
}

fn current_user_name(uid: u32) -> String {
    passwd_entries().into_iter().find(|entry| entry.1 == uid).map(|entry| entry.0).unwrap_or_else(|| uid.to_string())
}

/// (uid, gid) of `name`: /etc/passwd first, then `id` for users that live in
/// other NSS sources (LDAP, sssd).
fn lookup_user(name: &str) -> Option<(u32, u32)> {
    if let Some(entry) = passwd_entries().into_iter().find(|entry| entry.0 == name) {
        return Some((entry.1, entry.2));
    }
    let id = |flag: &str| -> Option<u32> {
        let output = Command::new("id").arg(flag).arg("--").arg(name).output().ok()?;
        if !output.status.success() {
            return None;
        }
        String::from_utf8_lossy(&output.stdout).trim().parse().ok()
    };
    Some((id("-u")?, id("-g")?))
}

fn passwd_entries() -> Vec<(String, u32, u32)> {
    let Ok(text) = fs::read_to_string("/etc/passwd") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let _password = fields.next()?;
            let uid = fields.next()?.parse().ok()?;
            let gid = fields.next()?.parse().ok()?;
            Some((name.to_owned(), uid, gid))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn root_never_becomes_the_server_user() {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 {
            let me = RunAs::resolve(Some("root")).unwrap();
            assert_eq!(me.uid, euid, "without root we run as ourselves");
            assert!(!me.switch);
            return;
        }
        let error = RunAs::resolve(Some("root")).unwrap_err().to_string();
        assert!(error.contains("uid 0"), "{error}");
        let error = RunAs::resolve(Some("pgtier-no-such-user")).unwrap_err().to_string();
        assert!(error.contains("scripts/ensure-postgres.sh"), "{error}");
        assert!(error.contains("PGTIER_PG_USER=pgtier-no-such-user"), "{error}");
    }
}
