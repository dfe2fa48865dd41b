//! One initdb per machine, then a copy per cluster.
//!
//! initdb takes about a second; copying its result takes tens of
//! milliseconds. The template lives in the temp dir, keyed by server version
//! and owner uid, and appears there only by an atomic rename of a complete
//! initdb result, so concurrent test processes either see a whole template or
//! none, and the slowest of several racing initdbs just discards its copy.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::binaries::server_version;
use crate::error::HarnessError;
use crate::os_user::RunAs;

/// Written last into a finished template: a directory without it is not one.
const COMPLETE_MARKER: &str = "pgtier-template-complete";

/// Templates already verified by this process, by (binary dir, owner uid).
/// The mutex also keeps the test threads of one process from running initdb
/// side by side.
static VERIFIED: Mutex<Option<HashMap<(PathBuf, u32), PathBuf>>> = Mutex::new(None);

/// The template data directory for these binaries and this user, creating it
/// if this machine has none yet.
pub(crate) fn template_dir(bin_dir: &Path, run_as: &RunAs) -> Result<PathBuf, HarnessError> {
    let mut verified = VERIFIED.lock().unwrap_or_else(PoisonError::into_inner);
    let key = (bin_dir.to_path_buf(), run_as.uid);
    if let Some(dir) = verified.as_ref().and_then(|map| map.get(&key))
        && is_complete(dir)
    {
        return Ok(dir.clone());
    }
    let version = server_version(bin_dir)?;
    let temp = std::env::temp_dir();
    let dir = temp.join(format!("pgtier-initdb-template-{version}-{}", run_as.uid));
    if !is_usable(&dir, run_as)? {
        create(bin_dir, run_as, &temp, &dir)?;
    }
    verified.get_or_insert_with(HashMap::new).insert(key, dir.clone());
    Ok(dir)
}

fn is_complete(dir: &Path) -> bool {
    dir.join(COMPLETE_MARKER).is_file() && dir.join("global/pg_control").is_file()
}

fn is_usable(dir: &Path, run_as: &RunAs) -> Result<bool, HarnessError> {
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return Ok(false);
    };
    // The temp dir is world-writable: a template someone else planted there
    // must not become the seed of our clusters.
    if !meta.is_dir() || meta.uid() != run_as.uid {
        return Err(HarnessError::InvalidOption(format!(
            "{} exists but is not a directory owned by uid {}; remove it",
            dir.display(),
            run_as.uid
        )));
    }
    if is_complete(dir) {
        return Ok(true);
    }
    // Complete templates appear only by rename, so this one was damaged after
    // the fact; move it out of the way so the rename below can succeed.
    let aside = unique_sibling(dir, "broken");
    fs::rename(dir, &aside).map_err(|error| HarnessError::io("move aside broken template", dir, error))?;
    // Best effort: a leftover directory in the temp dir harms nobody.
    let _ = fs::remove_dir_all(&aside);
    Ok(false)
}

fn create(bin_dir: &Path, run_as: &RunAs, temp: &Path, dir: &Path) -> Result<(), HarnessError> {
    run_as.ensure_traversable(&temp.join("x"))?;
    let staging = unique_sibling(dir, "staging");
    fs::create_dir(&staging).map_err(|error| HarnessError::io("create", &staging, error))?;
    let result = initdb(bin_dir, run_as, &staging).and_then(|()| {
        let marker = staging.join(COMPLETE_MARKER);
        fs::write(&marker, b"initdb finished; this directory is a pgtier cluster template\n")
            .map_err(|error| HarnessError::io("write", &marker, error))?;
        run_as.chown(&marker)
    });
    if let Err(error) = result {
        let _ = fs::remove_dir_all(&staging);
        return Err(error);
    }
    match fs::rename(&staging, dir) {
        Ok(()) => Ok(()),
        Err(_) if is_complete(dir) => {
            // Another process won the race; its template is as good as ours.
            let _ = fs::remove_dir_all(&staging);
            Ok(())
        }
        Err(error) => {
            let _ = fs::remove_dir_all(&staging);
            Err(HarnessError::io("rename template into place at", dir, error))
        }
    }
}

fn initdb(bin_dir: &Path, run_as: &RunAs, data_dir: &Path) -> Result<(), HarnessError> {
    run_as.chown(data_dir)?;
    let program = bin_dir.join("initdb");
    let output = run_as
        .command(&program)
        .arg("-D")
        .arg(data_dir)
        .args(["--no-sync", "-E", "UTF8", "--locale=C", "-U", "postgres", "--auth=trust"])
        .current_dir(data_dir)
        .env_remove("PGDATA")
        .stdin(Stdio::null())
        .output()
        .map_err(|error| HarnessError::io("run", &program, error))?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Err(HarnessError::CommandFailed {
        program: format!("{} -D {}", program.display(), data_dir.display()),
        status: output.status.to_string(),
        output: text.trim().to_owned(),
    })
}

/// Copies the template to `target` (which must not exist yet), keeping
/// ownership and modes: postgres insists its data directory is 0700 and owned
/// by the user running it.
pub(crate) fn copy_template(template: &Path, target: &Path) -> Result<(), HarnessError> {
    let output = Command::new("cp")
        .arg("-a")
        .arg("--")
        .arg(template)
        .arg(target)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| HarnessError::io("run cp -a into", target, error))?;
    if !output.status.success() {
        return Err(HarnessError::CommandFailed {
            program: format!("cp -a {} {}", template.display(), target.display()),
            status: output.status.to_string(),
            output: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    let marker = target.join(COMPLETE_MARKER);
    fs::remove_file(&marker).map_err(|error| HarnessError::io("remove", &marker, error))
}

fn unique_sibling(dir: &Path, purpose: &str) -> PathBuf {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.subsec_nanos()).unwrap_or(0);
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{purpose}-{}-{nanos}", std::process::id()));
    dir.with_file_name(name)
}
