//! Online backup and offline restore of a database directory.
//!
//! The engine holds an exclusive lock on its directory, so a copy of a
//! running database is made by the database itself
//! ([`crate::Database::backup`]), while writers go on:
//!
//! 1. A checkpoint is taken, and under the checkpoint lock (so no other
//!    checkpoint can slip in between) its file is opened and the WAL is
//!    pinned from its start: later checkpoints may delete the file (the open
//!    handle still reads it) but truncate no WAL the backup needs. The pin
//!    lives in memory only; a crash ends the backup with it.
//! 2. The end point: the newest commit ts and the WAL end just after it, read
//!    together under the commit lock (`commit_point`), then made durable.
//!    Every commit the checkpoint captured lies before it (the checkpoint
//!    waited for the WAL of everything it read), and every record before it
//!    belongs to a whole transaction (a transaction's records are appended
//!    under the commit lock in one go). So the checkpoint plus the WAL up to
//!    the end point is exactly the committed state at the end point.
//!    Everything acknowledged before the backup began is before it.
//! 3. Copy: the checkpoint file; the WAL segments from the one holding the
//!    checkpoint's start (or an earlier position a consumer named by the
//!    caller still needs, pinned with it) to the one holding the end point. Of the last, only
//!    the bytes before the end point are copied and the rest of its length
//!    is written as zeros: commits that go on during the copy are cut, and
//!    the copy looks like a preallocated segment after a clean stop, whose
//!    zero tail recovery already reads as "end of log" (an all-zero record
//!    header). Bytes before the end point are durable and never rewritten
//!    while the segment is in use, so reading them beside the writer is safe.
//! 4. Every file is fsynced, then the manifest (`backup_manifest`: format
//!    versions, checkpoint start, end point, and each file's size and
//!    CRC-32C, then a CRC-32C of the manifest itself) is written under a
//!    temporary name, fsynced and renamed: a directory without a manifest is
//!    an unfinished backup, and restore refuses it.
//!
//! What a backup holds: the engine's tables (local tables, and the rows and
//! definitions of cache groups as of the end point). Not: the directory's
//! incarnation id, the commit-stream consumers' positions
//! (`consumers.dat`), or anything else the cache keeps in the directory (the
//! flash tier file). [`restore`] gives the restored directory a new
//! incarnation: it is another directory whose log goes its own way from the
//! end point, and positions PostgreSQL keeps for the source (write-through
//! progress, keyed by the incarnation) are not its own. So a restored cache
//! is refused the source's node name in PostgreSQL (55000) unless started
//! with `--takeover` or another `[cache] awt_node`: two caches never claim
//! one name at once by accident.
//!
//! [`restore`] is offline: it checks the manifest and every file's size and
//! checksum before it writes anything, refuses a target that is not empty,
//! then copies (checking the checksums again as it reads) and fsyncs. A
//! marker file (`restore_in_progress`) is in the target from first to last,
//! and open refuses a directory holding it: a restore cut short is never
//! taken for a database. The
//! next open of the target recovers to the end point: the newest checkpoint
//! plus WAL replay up to the zero tail.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use pgtier_wal::{Lsn, Wal};

use crate::catalog::CommittedCatalog;
use crate::checkpoint::Checkpoints;
use crate::commit_order::CommitOrder;
use crate::consumers::Consumers;
use crate::error::{EngineError, Result};
use crate::files::sync_dir;
use crate::ids::CommitTs;

/// The manifest's file name in a backup directory.
pub const MANIFEST_FILE: &str = "backup_manifest";
const MANIFEST_TMP: &str = "backup_manifest.tmp";
/// In a data directory while [`restore`] fills it; open refuses it.
pub(crate) const RESTORE_MARKER: &str = "restore_in_progress";
/// First line of a manifest: the backup format this code writes and reads.
const MANIFEST_HEADER: &str = "pgtier backup manifest 1";
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// What a finished backup holds (also what its manifest records).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupManifest {
    /// The checkpoint file's magic, e.g. `PGTCKPT6`.
    pub checkpoint_format: String,
    /// The WAL segment format version (pgtier-wal README).
    pub wal_format: u32,
    /// The source directory's incarnation (for the record; restore makes a new one).
    pub source_incarnation: String,
    /// Replay starts here.
    pub checkpoint_lsn: Lsn,
    /// The end point: the restored database holds exactly the transactions
    /// whose WAL records lie before it.
    pub end_lsn: Lsn,
    /// The newest commit ts at the end point.
    pub end_commit_ts: CommitTs,
    /// Seconds since the Unix epoch when the end point was taken.
    pub end_unix_s: u64,
    pub files: Vec<ManifestFile>,
}

/// One file of a backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestFile {
    /// Relative to the backup (and the data) directory: `checkpoint-*.ckpt`
    /// or `wal/<20 digits>.wal`.
    pub path: String,
    pub bytes: u64,
    pub crc32c: u32,
}

/// What [`crate::Database::backup`] did.
#[derive(Clone, Debug)]
pub struct BackupReport {
    pub dir: PathBuf,
    pub manifest: BackupManifest,
    pub bytes: u64,
    pub duration: Duration,
}

/// Progress of a copy: bytes written so far out of the total.
#[derive(Clone, Copy, Debug)]
pub struct CopyProgress {
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// What [`restore`] did.
#[derive(Clone, Debug)]
pub struct RestoreReport {
    pub manifest: BackupManifest,
    pub bytes: u64,
    pub duration: Duration,
}

/// What the backup reads from the open database.
pub(crate) struct Source<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) wal: &'a Wal,
    pub(crate) commit: &'a CommitOrder,
    pub(crate) catalog: &'a CommittedCatalog,
    pub(crate) consumers: &'a Consumers,
    pub(crate) checkpoints: &'a Checkpoints,
    pub(crate) incarnation: &'a str,
}

/// Steps 1 to 4 of the module docs into `dest` (created; must be empty).
/// The WAL copied starts at the checkpoint's start, or earlier where a
/// consumer in `keep_wal_for` still needs it.
pub(crate) fn take(
    src: &Source<'_>,
    dest: &Path,
    keep_wal_for: &[&str],
    progress: &mut dyn FnMut(CopyProgress),
) -> Result<BackupReport> {
    let started = Instant::now();
    prepare_empty_dir(dest, "backup")?;
    let (ckpt, mut ckpt_file, _pin, wal_from) =
        src.checkpoints.take_pinned(src.dir, src.wal, src.commit, src.catalog, src.consumers, keep_wal_for)?;
    let (end_ts, end_lsn) = {
        let c = src.commit.lock();
        (c.last_ts, src.wal.end())
    };
    if src.wal.durable_end() < end_lsn {
        src.wal.wait_durable(Lsn(end_lsn.0 - 1))?;
    }
    let end_unix_s = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let segments = segments_to_copy(&src.dir.join("wal"), wal_from, end_lsn)?;
    let ckpt_bytes = ckpt_file.metadata().map_err(|e| EngineError::io("stat checkpoint", e))?.len();
    let total = ckpt_bytes + segments.iter().map(|s| s.bytes).sum::<u64>();
    let mut done = 0u64;
    let mut files = Vec::new();
    let ckpt_name = file_name(&ckpt.path)?;
    let mut format = [0u8; 8];
    let (crc, bytes) = copy_prefix(
        &mut ckpt_file,
        &dest.join(&ckpt_name),
        ckpt_bytes,
        ckpt_bytes,
        &mut |n| {
            done += n;
            progress(CopyProgress { bytes_done: done, bytes_total: total });
        },
        Some(&mut format),
    )?;
    files.push(ManifestFile { path: ckpt_name, bytes, crc32c: crc });
    fs::create_dir(dest.join("wal")).map_err(|e| EngineError::io("create backup wal directory", e))?;
    let mut wal_format = 0u32;
    for seg in &segments {
        let mut file = File::open(&seg.path).map_err(|e| EngineError::io(format!("open {}", seg.path.display()), e))?;
        let keep = seg.bytes.min(end_lsn.0.saturating_sub(seg.start));
        let mut head = [0u8; pgtier_wal::SEGMENT_HEADER_BYTES as usize];
        let name = format!("wal/{}", file_name(&seg.path)?);
        let (crc, bytes) = copy_prefix(
            &mut file,
            &dest.join(&name),
            keep,
            seg.bytes,
            &mut |n| {
                done += n;
                progress(CopyProgress { bytes_done: done, bytes_total: total });
            },
            Some(&mut head),
        )?;
        // The segment header's format version (pgtier-wal README), a u32 at offset 24.
        wal_format = u32::from_le_bytes([head[24], head[25], head[26], head[27]]);
        files.push(ManifestFile { path: name, bytes, crc32c: crc });
    }
    sync_dir(&dest.join("wal"))?;
    let manifest = BackupManifest {
        checkpoint_format: String::from_utf8_lossy(&format).into_owned(),
        wal_format,
        source_incarnation: src.incarnation.to_owned(),
        checkpoint_lsn: ckpt.start_lsn,
        end_lsn,
        end_commit_ts: end_ts,
        end_unix_s,
        files,
    };
    write_manifest(dest, &manifest)?;
    Ok(BackupReport { dir: dest.to_path_buf(), manifest, bytes: done, duration: started.elapsed() })
}

struct SegmentFile {
    start: u64,
    bytes: u64,
    path: PathBuf,
}

/// The segments of `wal_dir` that hold `[from, end)`: at least the one
/// holding (or ending at) `end`, so a restored log goes on at `end`.
fn segments_to_copy(wal_dir: &Path, from: Lsn, end: Lsn) -> Result<Vec<SegmentFile>> {
    let mut out = Vec::new();
    let entries = fs::read_dir(wal_dir).map_err(|e| EngineError::io("list WAL directory", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| EngineError::io("list WAL directory", e))?;
        let name = entry.file_name();
        let Some(start) = name.to_str().and_then(segment_start) else { continue };
        let bytes = entry.metadata().map_err(|e| EngineError::io("stat WAL segment", e))?.len();
        if start < end.0 && start + bytes >= from.0 {
            out.push(SegmentFile { start, bytes, path: entry.path() });
        }
    }
    out.sort_by_key(|s| s.start);
    let contiguous = out.windows(2).all(|w| w[0].start + w[0].bytes == w[1].start);
    let covers =
        out.first().is_some_and(|s| s.start <= from.0) && out.last().is_some_and(|s| s.start + s.bytes >= end.0);
    if !contiguous || !covers {
        return Err(EngineError::Corrupt(format!(
            "the WAL segments in {} do not cover {from:?}..{end:?}",
            wal_dir.display()
        )));
    }
    Ok(out)
}

/// `<20 decimal digits>.wal` (pgtier-wal's segment names) to its start LSN.
fn segment_start(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".wal")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether `path` is a name a backup may hold (no other file is ever read
/// or written by restore: a manifest cannot point outside the directories).
fn valid_backup_path(path: &str) -> bool {
    let ckpt = path.strip_prefix("checkpoint-").and_then(|p| p.strip_suffix(".ckpt"));
    if let Some(hex) = ckpt {
        return hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    path.strip_prefix("wal/").and_then(segment_start).is_some()
}

fn file_name(path: &Path) -> Result<String> {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| EngineError::Corrupt(format!("unexpected file name {}", path.display())))
}

/// Copies the first `keep` bytes of `from` into a new file `to`, then zeros
/// up to `len`; fsyncs it. Returns (CRC-32C, bytes written). `head` gets the
/// file's first bytes.
fn copy_prefix(
    from: &mut File,
    to: &Path,
    keep: u64,
    len: u64,
    progress: &mut dyn FnMut(u64),
    head: Option<&mut [u8]>,
) -> Result<(u32, u64)> {
    let io = |what: &str, e| EngineError::io(format!("{what} {}", to.display()), e);
    let mut out = OpenOptions::new().write(true).create_new(true).open(to).map_err(|e| io("create", e))?;
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    let (mut crc, mut written) = (0u32, 0u64);
    let mut head = head;
    while written < keep {
        let want = (keep - written).min(COPY_CHUNK_BYTES as u64) as usize;
        from.read_exact(&mut buf[..want]).map_err(|e| io("read source for", e))?;
        if written == 0
            && let Some(h) = head.take()
        {
            let n = h.len().min(want);
            h[..n].copy_from_slice(&buf[..n]);
        }
        out.write_all(&buf[..want]).map_err(|e| io("write", e))?;
        crc = crc32c::crc32c_append(crc, &buf[..want]);
        written += want as u64;
        progress(want as u64);
    }
    buf.fill(0);
    while written < len {
        let want = (len - written).min(COPY_CHUNK_BYTES as u64) as usize;
        out.write_all(&buf[..want]).map_err(|e| io("write", e))?;
        crc = crc32c::crc32c_append(crc, &buf[..want]);
        written += want as u64;
        progress(want as u64);
    }
    out.sync_all().map_err(|e| io("fsync", e))?;
    Ok((crc, written))
}

/// Creates `dir` (and its parents), or accepts an existing empty directory.
fn prepare_empty_dir(dir: &Path, what: &str) -> Result<()> {
    let invalid = |reason: String| EngineError::InvalidBackupDirectory {
        message: format!("{what} directory \"{}\" {reason}", dir.display()),
    };
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(invalid("is not empty".into()));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(|e| invalid(format!("cannot be created: {e}")))?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(invalid("is not a directory".into())),
        Err(e) => Err(invalid(format!("cannot be read: {e}"))),
    }
}

impl BackupManifest {
    /// The manifest's text: one `key value` line per field, one `file`
    /// line per file, then `checksum` (CRC-32C of every byte before it).
    pub fn encode(&self) -> String {
        let mut s = format!(
            "{MANIFEST_HEADER}\ncheckpoint_format {}\nwal_format {}\nsource_incarnation {}\ncheckpoint_lsn {}\n\
             end_lsn {}\nend_commit_ts {}\nend_unix_s {}\n",
            self.checkpoint_format,
            self.wal_format,
            self.source_incarnation,
            self.checkpoint_lsn.0,
            self.end_lsn.0,
            self.end_commit_ts.get(),
            self.end_unix_s
        );
        for f in &self.files {
            s.push_str(&format!("file {:08x} {} {}\n", f.crc32c, f.bytes, f.path));
        }
        let crc = crc32c::crc32c(s.as_bytes());
        s.push_str(&format!("checksum {crc:08x}\n"));
        s
    }

    /// Parses and checks a manifest's text (its checksum, its format, the
    /// names of its files).
    pub fn decode(text: &str) -> Result<BackupManifest> {
        let corrupt = |what: String| EngineError::Corrupt(format!("backup manifest: {what}"));
        let body_end = text.rfind("checksum ").ok_or_else(|| corrupt("no checksum line".into()))?;
        let (body, tail) = text.split_at(body_end);
        let stored = tail.trim_end().strip_prefix("checksum ").and_then(|h| u32::from_str_radix(h, 16).ok());
        if stored != Some(crc32c::crc32c(body.as_bytes())) {
            return Err(corrupt("checksum mismatch (the file was changed or damaged)".into()));
        }
        let mut lines = body.lines();
        if lines.next() != Some(MANIFEST_HEADER) {
            return Err(corrupt(format!("not a backup manifest this version reads (expected \"{MANIFEST_HEADER}\")")));
        }
        let mut m = BackupManifest {
            checkpoint_format: String::new(),
            wal_format: 0,
            source_incarnation: String::new(),
            checkpoint_lsn: Lsn(0),
            end_lsn: Lsn(0),
            end_commit_ts: CommitTs::new(0),
            end_unix_s: 0,
            files: Vec::new(),
        };
        let num = |v: &str, key: &str| v.parse::<u64>().map_err(|_| corrupt(format!("bad {key} {v:?}")));
        for line in lines {
            let (key, value) = line.split_once(' ').ok_or_else(|| corrupt(format!("bad line {line:?}")))?;
            match key {
                "checkpoint_format" => m.checkpoint_format = value.to_owned(),
                "wal_format" => m.wal_format = u32::try_from(num(value, key)?).map_err(|_| corrupt(key.into()))?,
                "source_incarnation" => m.source_incarnation = value.to_owned(),
                "checkpoint_lsn" => m.checkpoint_lsn = Lsn(num(value, key)?),
                "end_lsn" => m.end_lsn = Lsn(num(value, key)?),
                "end_commit_ts" => m.end_commit_ts = CommitTs::new(num(value, key)?),
                "end_unix_s" => m.end_unix_s = num(value, key)?,
                "file" => {
                    let mut parts = value.splitn(3, ' ');
                    let (Some(crc), Some(bytes), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
                        return Err(corrupt(format!("bad file line {line:?}")));
                    };
                    let crc32c = u32::from_str_radix(crc, 16).map_err(|_| corrupt(format!("bad checksum {crc:?}")))?;
                    if !valid_backup_path(path) {
                        return Err(corrupt(format!("unexpected file name {path:?}")));
                    }
                    m.files.push(ManifestFile { path: path.to_owned(), bytes: num(bytes, "size")?, crc32c });
                }
                _ => return Err(corrupt(format!("unknown field {key:?}"))),
            }
        }
        if !m.checkpoint_format.starts_with("PGTCKPT") || m.wal_format != 1 {
            return Err(corrupt(format!(
                "formats {} / WAL {} are not ones this version reads",
                m.checkpoint_format, m.wal_format
            )));
        }
        let ckpts = m.files.iter().filter(|f| f.path.starts_with("checkpoint-")).count();
        if ckpts != 1 || !m.files.iter().any(|f| f.path.starts_with("wal/")) || m.end_lsn < m.checkpoint_lsn {
            return Err(corrupt("it must list one checkpoint and the WAL after it".into()));
        }
        Ok(m)
    }
}

fn write_manifest(dest: &Path, manifest: &BackupManifest) -> Result<()> {
    let tmp = dest.join(MANIFEST_TMP);
    let io = |what: &str, e| EngineError::io(format!("{what} {}", tmp.display()), e);
    let mut f = File::create(&tmp).map_err(|e| io("create", e))?;
    f.write_all(manifest.encode().as_bytes()).map_err(|e| io("write", e))?;
    f.sync_all().map_err(|e| io("fsync", e))?;
    drop(f);
    fs::rename(&tmp, dest.join(MANIFEST_FILE)).map_err(|e| io("rename", e))?;
    sync_dir(dest)
}

/// Reads `backup`'s manifest and checks every file it lists: present, of
/// its size, of its checksum. Reads every byte; writes nothing.
pub fn verify_backup(backup: &Path) -> Result<BackupManifest> {
    let path = backup.join(MANIFEST_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(EngineError::Corrupt(format!(
                "{} has no {MANIFEST_FILE}: not a backup, or one that did not finish",
                backup.display()
            )));
        }
        Err(e) => return Err(EngineError::io(format!("read {}", path.display()), e)),
    };
    let manifest = BackupManifest::decode(&text)?;
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    for f in &manifest.files {
        let (crc, bytes) = checksum_file(&backup.join(&f.path), &mut buf)?;
        check_file(f, crc, bytes)?;
    }
    Ok(manifest)
}

fn check_file(f: &ManifestFile, crc: u32, bytes: u64) -> Result<()> {
    if bytes != f.bytes {
        return Err(EngineError::Corrupt(format!(
            "backup file {} has {bytes} bytes, the manifest says {}",
            f.path, f.bytes
        )));
    }
    if crc != f.crc32c {
        return Err(EngineError::Corrupt(format!(
            "backup file {} fails its checksum (CRC-32C {crc:08x}, the manifest says {:08x})",
            f.path, f.crc32c
        )));
    }
    Ok(())
}

fn checksum_file(path: &Path, buf: &mut [u8]) -> Result<(u32, u64)> {
    let mut file = File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => EngineError::Corrupt(format!("backup file {} is missing", path.display())),
        _ => EngineError::io(format!("open {}", path.display()), e),
    })?;
    let (mut crc, mut bytes) = (0u32, 0u64);
    loop {
        let n = file.read(buf).map_err(|e| EngineError::io(format!("read {}", path.display()), e))?;
        if n == 0 {
            return Ok((crc, bytes));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        bytes += n as u64;
    }
}

/// Restores the backup in `backup` into `data_dir` (created; must be empty):
/// verifies first, then copies, checking each file's checksum again, and
/// fsyncs. The next [`crate::Database::open`] of `data_dir` recovers to the
/// backup's end point. `data_dir` gets a new incarnation (module docs).
pub fn restore(backup: &Path, data_dir: &Path, progress: &mut dyn FnMut(CopyProgress)) -> Result<RestoreReport> {
    restore_with(backup, data_dir, progress, false)
}

/// [`restore`] for a hot standby (crates/engine replica.rs): the restored
/// directory keeps the source's incarnation, because it is the source's
/// directory continued elsewhere (the standby appends the active's WAL at
/// the same LSNs), not a directory whose log goes its own way.
pub fn restore_standby(
    backup: &Path,
    data_dir: &Path,
    progress: &mut dyn FnMut(CopyProgress),
) -> Result<RestoreReport> {
    restore_with(backup, data_dir, progress, true)
}

fn restore_with(
    backup: &Path,
    data_dir: &Path,
    progress: &mut dyn FnMut(CopyProgress),
    same_identity: bool,
) -> Result<RestoreReport> {
    let started = Instant::now();
    let manifest = verify_backup(backup)?;
    prepare_empty_dir(data_dir, "restore target")?;
    // Before anything else: a restore cut short (a full disk, a kill) must
    // not open as a database holding part of the backup (a checkpoint with
    // no WAL after it would look like a smaller, valid one).
    let marker = data_dir.join(RESTORE_MARKER);
    File::create(&marker).and_then(|f| f.sync_all()).map_err(|e| EngineError::io("create restore marker", e))?;
    sync_dir(data_dir)?;
    // The new directory's identity next, as at any creation.
    if same_identity {
        crate::incarnation::create_as(data_dir, &manifest.source_incarnation)?;
    } else {
        crate::incarnation::open_or_create(data_dir)?;
    }
    fs::create_dir(data_dir.join("wal")).map_err(|e| EngineError::io("create wal directory", e))?;
    let total = manifest.files.iter().map(|f| f.bytes).sum::<u64>();
    let mut done = 0u64;
    for f in &manifest.files {
        let from_path = backup.join(&f.path);
        let mut from =
            File::open(&from_path).map_err(|e| EngineError::io(format!("open {}", from_path.display()), e))?;
        let (crc, bytes) = copy_prefix(
            &mut from,
            &data_dir.join(&f.path),
            f.bytes,
            f.bytes,
            &mut |n| {
                done += n;
                progress(CopyProgress { bytes_done: done, bytes_total: total });
            },
            None,
        )?;
        check_file(f, crc, bytes)?;
    }
    sync_dir(&data_dir.join("wal"))?;
    sync_dir(data_dir)?;
    fs::remove_file(&marker).map_err(|e| EngineError::io("remove restore marker", e))?;
    sync_dir(data_dir)?;
    Ok(RestoreReport { manifest, bytes: done, duration: started.elapsed() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> BackupManifest {
        BackupManifest {
            checkpoint_format: "PGTCKPT6".into(),
            wal_format: 1,
            source_incarnation: "0123456789abcdef0123456789abcdef".into(),
            checkpoint_lsn: Lsn(32),
            end_lsn: Lsn(4096),
            end_commit_ts: CommitTs::new(7),
            end_unix_s: 1,
            files: vec![
                ManifestFile { path: "checkpoint-0000000000000020.ckpt".into(), bytes: 10, crc32c: 5 },
                ManifestFile { path: "wal/00000000000000000000.wal".into(), bytes: 4 << 20, crc32c: 0xdead_beef },
            ],
        }
    }

    #[test]
    fn manifest_round_trips_and_refuses_changes() {
        let m = manifest();
        let text = m.encode();
        assert_eq!(BackupManifest::decode(&text).unwrap(), m);
        let changed = text.replace("end_lsn 4096", "end_lsn 4097");
        let e = BackupManifest::decode(&changed).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn manifest_paths_stay_inside_the_backup() {
        let mut m = manifest();
        m.files[1].path = "wal/../../etc/passwd".into();
        let e = BackupManifest::decode(&m.encode()).unwrap_err();
        assert!(e.to_string().contains("unexpected file name"), "{e}");
    }
}
