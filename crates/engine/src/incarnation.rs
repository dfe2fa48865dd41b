//! A database directory's identity: a random id written once, when the
//! directory is created, and never changed.
//!
//! Positions in the WAL (LSNs) mean something only within one directory: a
//! directory lost and created anew starts its log at zero again. Whoever
//! stores positions elsewhere (write-through progress in PostgreSQL) keys
//! them by this id, so positions of a lost directory are never taken for
//! this one's. The file is written before the directory holds anything else
//! (temporary name, fsync, rename, directory fsync), so a directory with
//! data and no id is one made before ids existed (`adopted`), never one whose
//! creation was cut short.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use crate::error::{EngineError, Result};

const FILE: &str = "incarnation";
const TEMP: &str = "incarnation.tmp";

/// What [`crate::Database::incarnation`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incarnation {
    /// 32 lowercase hex digits (128 random bits).
    pub id: String,
    /// The directory held data written before ids existed: the id was made
    /// at this open for a directory with a history.
    pub adopted: bool,
}

/// Reads the directory's id, creating it first when the directory has none.
/// `dir` exists.
pub(crate) fn open_or_create(dir: &Path) -> Result<Incarnation> {
    let path = dir.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
                return Err(EngineError::Corrupt(format!("{} does not hold a database id", path.display())));
            }
            Ok(Incarnation { id: id.to_owned(), adopted: false })
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let had_data = std::fs::read_dir(dir)
                .map_err(|e| EngineError::io(format!("reading {}", dir.display()), e))?
                .filter_map(std::result::Result::ok)
                // The lock file is taken before this runs: not history.
                .any(|entry| entry.file_name() != TEMP && entry.file_name() != crate::files::LOCK_FILE);
            let id = random_id()?;
            write_durably(dir, &id)?;
            Ok(Incarnation { id, adopted: had_data })
        }
        Err(error) => Err(EngineError::io(format!("reading {}", path.display()), error)),
    }
}

/// Gives a new directory the id `id` (a standby's copy of the active's).
pub(crate) fn create_as(dir: &Path, id: &str) -> Result<()> {
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return Err(EngineError::Corrupt(format!("{id:?} is not a database id")));
    }
    write_durably(dir, id)
}

fn random_id() -> Result<String> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| EngineError::io("reading /dev/urandom", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn write_durably(dir: &Path, id: &str) -> Result<()> {
    let temp = dir.join(TEMP);
    let io = |what: &str, e| EngineError::io(format!("{what} {}", temp.display()), e);
    let mut file =
        OpenOptions::new().write(true).create(true).truncate(true).open(&temp).map_err(|e| io("creating", e))?;
    file.write_all(format!("{id}\n").as_bytes()).map_err(|e| io("writing", e))?;
    file.sync_all().map_err(|e| io("syncing", e))?;
    std::fs::rename(&temp, dir.join(FILE)).map_err(|e| io("renaming", e))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| EngineError::io(format!("syncing {}", dir.display()), e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::open_or_create;

    #[test]
    fn created_once_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = open_or_create(dir.path()).unwrap();
        assert!(!first.adopted, "an empty directory is a new one");
        assert_eq!(first.id.len(), 32);
        let again = open_or_create(dir.path()).unwrap();
        assert_eq!(again, first);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(open_or_create(other.path()).unwrap().id, first.id);
    }

    #[test]
    fn a_directory_holding_only_its_lock_file_is_new() {
        let dir = tempfile::tempdir().unwrap();
        let _lock = crate::files::DirLock::acquire(dir.path()).unwrap();
        assert!(!open_or_create(dir.path()).unwrap().adopted, "the lock file is no history");
    }

    #[test]
    fn a_directory_with_history_is_adopted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("wal-0000"), b"x").unwrap();
        let made = open_or_create(dir.path()).unwrap();
        assert!(made.adopted);
        assert!(!open_or_create(dir.path()).unwrap().adopted, "adopted once, then it is the directory's own");
    }

    #[test]
    fn a_damaged_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("incarnation"), b"not an id\n").unwrap();
        assert_eq!(open_or_create(dir.path()).unwrap_err().sqlstate(), "XX001");
    }
}
