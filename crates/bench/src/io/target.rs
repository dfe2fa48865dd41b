//! The file (or block device) the I/O runs on: created, preallocated and
//! filled once with non-zero data so reads hit real blocks (a preallocated
//! but unwritten extent reads as zeros without touching the device), reused
//! by later runs when its size is right; O_DIRECT tried first and, where the
//! file system refuses it, buffered I/O with `posix_fadvise` instead, said
//! loudly and recorded in the results.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use super::buffer::AlignedBuf;
use super::spec::{ALIGN_BYTES, IoPlan, Mode, format_bytes};
use super::{IoError, io_error};

/// Bytes written per call while filling a new file.
const FILL_CHUNK_BYTES: u64 = 4 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    File,
    BlockDevice,
}

/// What the run measures, as prepared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub path: PathBuf,
    pub kind: TargetKind,
    /// The span offsets are drawn from: the file, or the first `--size` bytes of a device.
    pub size_bytes: u64,
    /// O_DIRECT in use.
    pub direct: bool,
    /// Set when O_DIRECT was asked for and the file system refused it.
    pub direct_refused: Option<String>,
    /// Where it lives, e.g. "/dev/vda (ext4 at /, rotational)".
    pub device: String,
    /// "reused", "created and filled in 3.1 s (1.4 GB/s)", "block device".
    pub prepared: String,
}

impl Target {
    /// For tests: `plan`'s file, as if prepared with O_DIRECT.
    #[cfg(test)]
    pub(crate) fn for_test(plan: &IoPlan) -> Target {
        Target {
            path: plan.file.clone(),
            kind: TargetKind::File,
            size_bytes: plan.size_bytes,
            direct: true,
            direct_refused: None,
            device: "/dev/vda (ext4 at /)".to_owned(),
            prepared: "reused".to_owned(),
        }
    }
}

/// Opens, creates or reuses the target named by `plan`, probing O_DIRECT.
/// `fill_progress(done, total)` is called while a new file is filled.
pub fn prepare(plan: &IoPlan, fill_progress: &mut dyn FnMut(u64, u64)) -> Result<Target, IoError> {
    let path = &plan.file;
    match std::fs::metadata(path) {
        Ok(meta) if meta.file_type().is_block_device() => device_target(plan, &meta),
        Ok(meta) if meta.is_file() => {
            if meta.len() != plan.size_bytes {
                return Err(IoError::Invalid(format!(
                    "invalid --file {}: it exists with {} bytes, not --size {} ({} bytes); \
                     remove it or pass --size {}",
                    path.display(),
                    meta.len(),
                    format_bytes(plan.size_bytes),
                    plan.size_bytes,
                    format_bytes(meta.len())
                )));
            }
            let direct = choose_direct(plan.direct, path, path)?;
            Ok(file_target(plan, &meta, direct, "reused (already the right size)".to_owned()))
        }
        Ok(_) => {
            Err(IoError::Invalid(format!("invalid --file {}: not a regular file or a block device", path.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_and_fill(plan, fill_progress),
        Err(e) => Err(io_error(format!("reading {}", path.display()), e)),
    }
}

fn device_target(plan: &IoPlan, meta: &Metadata) -> Result<Target, IoError> {
    let path = plan.file.clone();
    if plan.writes() && !plan.device_writes {
        return Err(IoError::Invalid(format!(
            "invalid --file {}: a block device, and write modes would overwrite what it holds; \
             measure read modes only, or pass --destroy-device-data",
            path.display()
        )));
    }
    let mut file = File::open(&path).map_err(|e| io_error(format!("opening {}", path.display()), e))?;
    let device_bytes = file.seek(SeekFrom::End(0)).map_err(|e| io_error(format!("sizing {}", path.display()), e))?;
    let size_bytes = plan.size_bytes.min(device_bytes) / ALIGN_BYTES * ALIGN_BYTES;
    let largest = plan.block_sizes.iter().copied().max().unwrap_or(0);
    if size_bytes < largest {
        return Err(IoError::Invalid(format!(
            "invalid --file {}: the device holds {device_bytes} bytes, less than the largest block size {}",
            path.display(),
            format_bytes(largest)
        )));
    }
    let (direct, direct_refused) = choose_direct(plan.direct, &path, &path)?;
    let span = if size_bytes < device_bytes {
        format!("block device; its first {} (--size) of {}", format_bytes(size_bytes), format_bytes(device_bytes))
    } else {
        "block device, whole".to_owned()
    };
    Ok(Target {
        device: describe_device(&path, meta),
        path,
        kind: TargetKind::BlockDevice,
        size_bytes,
        direct,
        direct_refused,
        prepared: span,
    })
}

/// The name a file is filled under: renamed to the real one only when
/// whole, so a file of the right size at the real name was filled.
fn filling_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".filling");
    path.with_file_name(name)
}

fn create_and_fill(plan: &IoPlan, progress: &mut dyn FnMut(u64, u64)) -> Result<Target, IoError> {
    let path = &plan.file;
    let tmp = filling_path(path);
    let result = fill_new(plan, &tmp, progress);
    let (direct, seconds) = match result {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, path)
        .map_err(|e| io_error(format!("renaming {} to {}", tmp.display(), path.display()), e))?;
    let meta = std::fs::metadata(path).map_err(|e| io_error(format!("reading {}", path.display()), e))?;
    let rate = plan.size_bytes as f64 / seconds.max(1e-9) / 1e6;
    let prepared = format!("created, preallocated and filled in {seconds:.1} s ({rate:.0} MB/s)");
    Ok(file_target(plan, &meta, direct, prepared))
}

/// The regular file `plan.file`, with its O_DIRECT verdict.
fn file_target(plan: &IoPlan, meta: &Metadata, (direct, direct_refused): Direct, prepared: String) -> Target {
    Target {
        device: describe_device(&plan.file, meta),
        path: plan.file.clone(),
        kind: TargetKind::File,
        size_bytes: plan.size_bytes,
        direct,
        direct_refused,
        prepared,
    }
}

/// O_DIRECT in use, and why not when it was asked for and refused.
type Direct = (bool, Option<String>);

/// Preallocates `tmp` and writes every byte of it; returns the O_DIRECT
/// verdict and the seconds the fill took.
fn fill_new(plan: &IoPlan, tmp: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<(Direct, f64), IoError> {
    let size = plan.size_bytes;
    let what = |verb: &str| format!("{verb} {}", tmp.display());
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(tmp)
        .map_err(|e| io_error(what("creating"), e))?;
    let len = libc::off_t::try_from(size).map_err(|_| IoError::Invalid(format!("invalid --size {size}")))?;
    // SAFETY: fallocate only reads its integer arguments; the descriptor is open.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            // Not every file system preallocates; the fill below writes every byte anyway.
            Some(libc::EOPNOTSUPP) => file.set_len(size).map_err(|e| io_error(what("sizing"), e))?,
            Some(libc::ENOSPC) => {
                let dir = tmp.parent().map_or_else(|| ".".to_owned(), |d| d.display().to_string());
                return Err(IoError::Invalid(format!(
                    "invalid --size {}: not enough free space for it in {dir}",
                    format_bytes(size)
                )));
            }
            _ => return Err(io_error(what("preallocating"), e)),
        }
    }
    drop(file);
    let (direct, direct_refused) = choose_direct(plan.direct, tmp, &plan.file)?;
    let file = open_with(tmp, true, direct).map_err(|e| io_error(what("opening"), e))?;
    let started = Instant::now();
    let chunk = FILL_CHUNK_BYTES.min(size);
    let mut buf = AlignedBuf::new(chunk as usize).map_err(|e| io_error("allocating the fill buffer", e))?;
    let mut rng = SmallRng::seed_from_u64(plan.seed);
    let mut offset = 0u64;
    while offset < size {
        let n = chunk.min(size - offset) as usize;
        // Fresh random bytes per chunk: nothing for a compressing or
        // deduplicating device to shrink, and never a zero block.
        rng.fill_bytes(&mut buf.as_mut_slice()[..n]);
        buf.as_mut_slice()[0] |= 1;
        file.write_all_at(&buf.as_slice()[..n], offset).map_err(|e| io_error(what("filling"), e))?;
        offset += n as u64;
        progress(offset, size);
    }
    file.sync_data().map_err(|e| io_error(what("syncing"), e))?;
    Ok(((direct, direct_refused), started.elapsed().as_secs_f64()))
}

/// Opens the target for the I/O of one point.
pub fn open_with(path: &Path, write: bool, direct: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(write);
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    options.open(path)
}

/// O_DIRECT if asked for and the file system takes it: one aligned read of
/// `path` proves it (some file systems accept the flag at open and refuse
/// the I/O). `shown` is the name messages use.
fn choose_direct(wanted: bool, path: &Path, shown: &Path) -> Result<Direct, IoError> {
    if !wanted {
        return Ok((false, None));
    }
    let probe = open_with(path, false, true).and_then(|file| {
        let mut buf = AlignedBuf::new(ALIGN_BYTES as usize)?;
        file.read_exact_at(buf.as_mut_slice(), 0)
    });
    direct_verdict(shown, probe)
}

/// The outcome of the O_DIRECT probe: refused (EINVAL, EOPNOTSUPP) falls
/// back to buffered I/O with the reason; any other error is an error.
fn direct_verdict(path: &Path, probe: std::io::Result<()>) -> Result<Direct, IoError> {
    match probe {
        Ok(()) => Ok((true, None)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) => Ok((
            false,
            Some(format!(
                "the file system of {} refused O_DIRECT ({e}); measuring buffered I/O with posix_fadvise \
                 (cache dropped before each point, random/sequential hints) instead: reads may come from \
                 the page cache and writes only reach it",
                path.display()
            )),
        )),
        Err(e) => Err(io_error(format!("probing O_DIRECT on {}", path.display()), e)),
    }
}

/// Buffered I/O only: drops the file's cached pages (after writing back its
/// dirty ones, which DONTNEED would keep) and hints the access pattern, as
/// fio does by default (`invalidate=1`, `fadvise_hint=1`).
pub fn advise_buffered(file: &File, mode: Mode) -> std::io::Result<()> {
    file.sync_data()?;
    let fd = file.as_raw_fd();
    let hint = if mode.is_random() { libc::POSIX_FADV_RANDOM } else { libc::POSIX_FADV_SEQUENTIAL };
    for advice in [libc::POSIX_FADV_DONTNEED, hint] {
        // SAFETY: posix_fadvise only reads its integer arguments.
        let rc = unsafe { libc::posix_fadvise(fd, 0, 0, advice) };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
    }
    Ok(())
}

/// "/dev/vda (ext4 at /, rotational)" from /proc/self/mountinfo and sysfs;
/// as much as can be read.
fn describe_device(path: &Path, meta: &Metadata) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let block = meta.file_type().is_block_device();
    let dev = if block { meta.rdev() } else { meta.dev() };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = format!("/sys/dev/block/{major}:{minor}");
    let rotational = std::fs::read_to_string(format!("{sys}/queue/rotational"))
        .or_else(|_| std::fs::read_to_string(format!("{sys}/../queue/rotational")))
        .ok()
        .map(|r| if r.trim() == "1" { "rotational" } else { "non-rotational" });
    let mount = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|text| mount_of(&text, &format!("{major}:{minor}"), &path));
    let mut facts: Vec<String> = Vec::new();
    let name = match (&mount, block) {
        (_, true) => "block device".to_owned(),
        (Some((source, fstype, target)), false) => {
            facts.push(format!("{fstype} at {target}"));
            source.clone()
        }
        (None, false) => format!("device {major}:{minor}"),
    };
    facts.extend(rotational.map(str::to_owned));
    if facts.is_empty() { name } else { format!("{name} ({})", facts.join(", ")) }
}

/// (source, file system type, mount point) of device `major:minor` in a
/// mountinfo text: of its mounts, the one whose mount point is the longest
/// prefix of `path` (bind mounts show one device at several places).
fn mount_of(mountinfo: &str, device: &str, path: &Path) -> Option<(String, String, String)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split_whitespace().collect();
            let mut right = right.split_whitespace();
            let fstype = right.next()?;
            let source = right.next()?;
            let target = *left.get(4)?;
            (left.get(2) == Some(&device)).then(|| (source.to_owned(), fstype.to_owned(), target.to_owned()))
        })
        .max_by_key(|(_, _, target)| if path.starts_with(target) { target.len() } else { 0 })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn plan(file: PathBuf, size_bytes: u64) -> IoPlan {
        IoPlan { size_bytes, seed: 7, ..IoPlan::for_test(file) }
    }

    #[test]
    fn a_new_file_is_filled_with_non_zero_blocks_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bench");
        let size = 9 << 20; // two whole fill chunks and a partial one
        let mut calls = Vec::new();
        let target = prepare(&plan(path.clone(), size), &mut |done, total| calls.push((done, total))).unwrap();
        assert_eq!(target.kind, TargetKind::File);
        assert!(target.prepared.starts_with("created"), "{}", target.prepared);
        assert_eq!(calls.last(), Some(&(size, size)));
        assert!(!filling_path(&path).exists());
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, size);
        for (i, block) in bytes.chunks(4096).enumerate() {
            assert!(block.iter().any(|&b| b != 0), "block {i} is all zeros");
        }
        // This machine's file systems take O_DIRECT.
        assert!(target.direct, "{:?}", target.direct_refused);

        let again = prepare(&plan(path.clone(), size), &mut |_, _| panic!("refilled")).unwrap();
        assert!(again.prepared.starts_with("reused"), "{}", again.prepared);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "reuse must not rewrite");

        let wrong = prepare(&plan(path, 4 << 20), &mut |_, _| {}).unwrap_err().to_string();
        assert!(wrong.contains("exists with 9437184 bytes, not --size 4m"), "{wrong}");
    }

    #[test]
    fn refused_o_direct_falls_back_to_buffered_with_the_reason() {
        let path = Path::new("/some/file");
        let refused = direct_verdict(path, Err(std::io::Error::from_raw_os_error(libc::EINVAL))).unwrap();
        assert!(!refused.0);
        let why = refused.1.unwrap();
        assert!(why.contains("refused O_DIRECT") && why.contains("posix_fadvise"), "{why}");
        assert_eq!(direct_verdict(path, Ok(())).unwrap(), (true, None));
        assert!(direct_verdict(path, Err(std::io::Error::from_raw_os_error(libc::EIO))).is_err());
        let dir = tempfile::tempdir().unwrap();
        let buffered = plan(dir.path().join("b.bench"), 1 << 20);
        let target = prepare(&IoPlan { direct: false, ..buffered }, &mut |_, _| {}).unwrap();
        assert_eq!((target.direct, target.direct_refused), (false, None));
    }

    #[test]
    fn other_file_types_are_refused() {
        let e = prepare(&plan(PathBuf::from("/dev/null"), 1 << 20), &mut |_, _| {}).unwrap_err().to_string();
        assert!(e.contains("not a regular file or a block device"), "{e}");
    }

    #[test]
    fn mount_lookup() {
        let text = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    30 22 0:25 / /dev/shm rw - tmpfs tmpfs rw\n\
                    31 22 254:0 /x /mnt/x rw - ext4 /dev/vda rw\n";
        let shm = Path::new("/dev/shm/f");
        assert_eq!(mount_of(text, "0:25", shm), Some(("tmpfs".into(), "tmpfs".into(), "/dev/shm".into())));
        assert_eq!(mount_of(text, "254:0", Path::new("/mnt/x/f")).unwrap().2, "/mnt/x");
        assert_eq!(mount_of(text, "254:0", Path::new("/tmp/f")).unwrap().2, "/");
        assert_eq!(mount_of(text, "8:1", shm), None);
    }
}
