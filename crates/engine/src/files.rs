//! File-system steps shared by the files the engine replaces atomically
//! (checkpoints, consumer positions): write a temporary file, fsync it,
//! rename it over the old one, then fsync the directory so the rename
//! itself survives a crash.

use std::fs::OpenOptions;
use std::path::Path;

use crate::error::{EngineError, Result};

/// Makes the entries of `dir` (a rename into it) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let d = OpenOptions::new().read(true).open(dir).map_err(|e| EngineError::io("open directory", e))?;
    d.sync_all().map_err(|e| EngineError::io("fsync directory", e))
}
