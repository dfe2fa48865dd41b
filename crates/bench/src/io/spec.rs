//! What one `pgtier bench io` run measures and the checks on it: modes,
//! block sizes, queue depths, the file's size, timing. Every error names
//! the flag it is about, so the binary can print it as the one line a user
//! acts on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::IoError;

/// Smallest block size: one sector.
pub const BLOCK_MIN_BYTES: u64 = 512;
/// Largest block size: 16 MiB (ORION's large I/O is 1 MiB; 16 leaves room for DSS-style probes).
pub const BLOCK_MAX_BYTES: u64 = 16 << 20;
/// Most threads one point may start (each holds one buffer of the block size).
pub const QUEUE_DEPTH_MAX: u32 = 1024;
/// Buffer alignment and the unit a file's size must be a multiple of:
/// O_DIRECT on 4Kn devices and every common file system needs no more.
pub const ALIGN_BYTES: u64 = 4096;
/// Largest `--size` accepted: a bound on what a typo can make the fill write.
pub const SIZE_MAX_BYTES: u64 = 64 << 40;

/// An access pattern, in fio's terms where it has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    RandRead,
    RandWrite,
    SeqRead,
    SeqWrite,
    /// Random reads and writes, `read_pct` % reads, decided per I/O.
    Mixed,
}

impl Mode {
    pub const ALL: [Mode; 5] = [Mode::RandRead, Mode::RandWrite, Mode::SeqRead, Mode::SeqWrite, Mode::Mixed];

    pub fn name(self) -> &'static str {
        match self {
            Mode::RandRead => "randread",
            Mode::RandWrite => "randwrite",
            Mode::SeqRead => "seqread",
            Mode::SeqWrite => "seqwrite",
            Mode::Mixed => "mixed",
        }
    }

    /// `--mode` values: one of [`Mode::ALL`]'s names.
    pub fn parse(text: &str) -> Result<Mode, String> {
        let text = text.trim();
        Mode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| format!("unknown mode '{text}' (expected randread, randwrite, seqread, seqwrite or mixed)"))
    }

    pub fn is_random(self) -> bool {
        !matches!(self, Mode::SeqRead | Mode::SeqWrite)
    }

    pub fn writes(self) -> bool {
        matches!(self, Mode::RandWrite | Mode::SeqWrite | Mode::Mixed)
    }

    /// fio's `--rw` for this mode.
    pub fn fio_rw(self) -> &'static str {
        match self {
            Mode::RandRead => "randread",
            Mode::RandWrite => "randwrite",
            Mode::SeqRead => "read",
            Mode::SeqWrite => "write",
            Mode::Mixed => "randrw",
        }
    }
}

/// "4k", "1m", "64MiB", "4096": a byte count with an optional binary suffix
/// (k, m, g, t; "b", "ib" and case ignored).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix("ib").or_else(|| t.strip_suffix('b')).unwrap_or(&t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 10),
        Some((i, 'm')) => (&t[..i], 20),
        Some((i, 'g')) => (&t[..i], 30),
        Some((i, 't')) => (&t[..i], 40),
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("'{}' is not a size (expected e.g. 4096, 4k, 64m, 4g)", text.trim()))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("'{}' is too large", text.trim()))
}

/// The shortest exact form: 4096 → "4k", 1048576 → "1m", 1000 → "1000".
pub fn format_bytes(n: u64) -> String {
    for (shift, suffix) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", n >> shift);
        }
    }
    n.to_string()
}

/// A `--block-sizes` entry: a power of two from 512 to 16m (so a multiple of 512).
pub fn parse_block_size(text: &str) -> Result<u64, String> {
    let n = parse_bytes(text)?;
    if !n.is_power_of_two() || !(BLOCK_MIN_BYTES..=BLOCK_MAX_BYTES).contains(&n) {
        return Err(format!("block size '{}' must be a power of two from 512 to 16m", text.trim()));
    }
    Ok(n)
}

/// A `--queue-depths` entry: 1 to 1024.
pub fn parse_queue_depth(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let n: u32 = t.parse().map_err(|_| format!("queue depth '{t}' is not a whole number"))?;
    if n == 0 || n > QUEUE_DEPTH_MAX {
        return Err(format!("queue depth {n} must be from 1 to {QUEUE_DEPTH_MAX}"));
    }
    Ok(n)
}

/// `--size`: a multiple of 4k (O_DIRECT), at most 64t.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let n = parse_bytes(text)?;
    if n == 0 || !n.is_multiple_of(ALIGN_BYTES) {
        return Err(format!("size '{}' must be a positive multiple of 4k", text.trim()));
    }
    if n > SIZE_MAX_BYTES {
        return Err(format!("size '{}' is larger than {}", text.trim(), format_bytes(SIZE_MAX_BYTES)));
    }
    Ok(n)
}

/// Whether fio runs each point too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FioUse {
    /// When `fio` is on PATH (say once when it is not).
    IfInstalled,
    /// `--no-fio`.
    Skip,
}

/// A whole run, checked by [`IoPlan::check`] before any file is touched.
#[derive(Clone, Debug)]
pub struct IoPlan {
    /// The file (or block device) measured.
    pub file: PathBuf,
    pub size_bytes: u64,
    pub modes: Vec<Mode>,
    /// Reads in % of the I/Os of [`Mode::Mixed`].
    pub read_pct: u8,
    pub block_sizes: Vec<u64>,
    pub queue_depths: Vec<u32>,
    pub duration: Duration,
    /// Run before each measure window, not counted.
    pub warmup: Duration,
    /// O_DIRECT (falls back to buffered I/O, said loudly, where refused).
    pub direct: bool,
    /// Each thread fsyncs after this many of its writes; `None`: never.
    pub fsync_every: Option<u32>,
    pub fio: FioUse,
    /// Write modes on a block device overwrite whatever it holds: only with this.
    pub device_writes: bool,
    /// Seed of the random offsets (each thread derives its own).
    pub seed: u64,
}

/// One point of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    pub mode: Mode,
    pub block_size: u64,
    pub queue_depth: u32,
}

impl Point {
    /// "randread 4k QD16".
    pub fn label(&self) -> String {
        format!("{} {} QD{}", self.mode.name(), format_bytes(self.block_size), self.queue_depth)
    }
}

impl IoPlan {
    /// Every point, mode by mode, then block size, then queue depth (the
    /// order they run and print in).
    pub fn points(&self) -> Vec<Point> {
        let mut points = Vec::new();
        for &mode in &self.modes {
            for &block_size in &self.block_sizes {
                for &queue_depth in &self.queue_depths {
                    points.push(Point { mode, block_size, queue_depth });
                }
            }
        }
        points
    }

    pub fn writes(&self) -> bool {
        self.modes.iter().any(|m| m.writes())
    }

    /// For tests: randread 4k QD1 on a 64 MiB `file`, 1 s, no warm-up,
    /// O_DIRECT, no fio; tests change what they need.
    #[cfg(test)]
    pub(crate) fn for_test(file: PathBuf) -> IoPlan {
        IoPlan {
            file,
            size_bytes: 64 << 20,
            modes: vec![Mode::RandRead],
            read_pct: 70,
            block_sizes: vec![4096],
            queue_depths: vec![1],
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            direct: true,
            fsync_every: None,
            fio: FioUse::Skip,
            device_writes: false,
            seed: 1,
        }
    }

    /// The checks that need no file: lists not empty, entries in range,
    /// `--size` at least the largest block size, the file's directory there.
    pub fn check(&self) -> Result<(), IoError> {
        let invalid = |m: String| Err(IoError::Invalid(m));
        if self.modes.is_empty() {
            return invalid("invalid --mode: give at least one mode".to_owned());
        }
        if self.block_sizes.is_empty() {
            return invalid("invalid --block-sizes: give at least one block size".to_owned());
        }
        if self.queue_depths.is_empty() {
            return invalid("invalid --queue-depths: give at least one queue depth".to_owned());
        }
        for &bs in &self.block_sizes {
            parse_block_size(&bs.to_string()).map_err(|e| IoError::Invalid(format!("invalid --block-sizes: {e}")))?;
        }
        for &qd in &self.queue_depths {
            parse_queue_depth(&qd.to_string()).map_err(|e| IoError::Invalid(format!("invalid --queue-depths: {e}")))?;
        }
        if self.read_pct > 100 {
            return invalid(format!("invalid --read-pct {}: must be from 0 to 100", self.read_pct));
        }
        if self.duration.is_zero() {
            return invalid("invalid --duration 0: must be more than 0 seconds".to_owned());
        }
        if self.fsync_every == Some(0) {
            return invalid("invalid --fsync-every 0: must be at least 1 (omit it to never fsync)".to_owned());
        }
        let largest = self.block_sizes.iter().copied().max().unwrap_or(0);
        if self.size_bytes < largest {
            return invalid(format!(
                "invalid --size {}: smaller than the largest block size {} (--block-sizes)",
                format_bytes(self.size_bytes),
                format_bytes(largest)
            ));
        }
        check_directory(&self.file)
    }
}

/// The file's directory must exist: the bench creates the file, never directories.
fn check_directory(file: &Path) -> Result<(), IoError> {
    if file.as_os_str().is_empty() {
        return Err(IoError::Invalid("invalid --file: empty path".to_owned()));
    }
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(IoError::Invalid(format!(
            "invalid --file {}: directory {} does not exist",
            file.display(),
            dir.display()
        )));
    }
    if file.is_dir() {
        return Err(IoError::Invalid(format!("invalid --file {}: is a directory (name a file in it)", file.display())));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn plan(dir: &Path) -> IoPlan {
        IoPlan {
            modes: vec![Mode::RandRead, Mode::Mixed],
            block_sizes: vec![4096, 1 << 20],
            queue_depths: vec![1, 4],
            ..IoPlan::for_test(dir.join("f.bench"))
        }
    }

    fn invalid(plan: &IoPlan) -> String {
        match plan.check() {
            Err(IoError::Invalid(m)) => m,
            other => panic!("expected an invalid-argument error, got {other:?}"),
        }
    }

    #[test]
    fn modes_by_name() {
        assert_eq!(Mode::parse("randread"), Ok(Mode::RandRead));
        assert_eq!(Mode::parse(" SeqWrite "), Ok(Mode::SeqWrite));
        assert_eq!(Mode::parse("mixed"), Ok(Mode::Mixed));
        let e = Mode::parse("randrw").unwrap_err();
        assert!(e.contains("unknown mode 'randrw'") && e.contains("seqread"), "{e}");
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m.name()), Ok(m));
        }
        assert_eq!(Mode::SeqRead.fio_rw(), "read");
        assert_eq!(Mode::Mixed.fio_rw(), "randrw");
        assert!(Mode::Mixed.writes() && Mode::Mixed.is_random() && !Mode::SeqRead.is_random());
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4k"), Ok(4096));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("1mb"), Ok(1 << 20));
        assert_eq!(parse_bytes("4g"), Ok(4 << 30));
        assert!(parse_bytes("4x").is_err());
        assert!(parse_bytes("k").is_err());
        assert!(parse_bytes("-4k").is_err());
        assert!(parse_bytes("99999999999t").unwrap_err().contains("too large"));
        assert_eq!(format_bytes(4096), "4k");
        assert_eq!(format_bytes(1 << 20), "1m");
        assert_eq!(format_bytes(4 << 30), "4g");
        assert_eq!(format_bytes(512), "512");
        assert_eq!(format_bytes(1536), "1536");
    }

    #[test]
    fn block_sizes_are_powers_of_two_from_512_to_16m() {
        assert_eq!(parse_block_size("512"), Ok(512));
        assert_eq!(parse_block_size("16m"), Ok(16 << 20));
        for bad in ["256", "3k", "1536", "32m", "0", "x"] {
            assert!(parse_block_size(bad).is_err(), "{bad} accepted");
        }
        assert!(parse_block_size("3k").unwrap_err().contains("power of two from 512 to 16m"));
    }

    #[test]
    fn queue_depths_from_1_to_1024() {
        assert_eq!(parse_queue_depth("1"), Ok(1));
        assert_eq!(parse_queue_depth("1024"), Ok(1024));
        for bad in ["0", "1025", "-1", "x", ""] {
            assert!(parse_queue_depth(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn sizes_are_multiples_of_4k() {
        assert_eq!(parse_size("64m"), Ok(64 << 20));
        assert!(parse_size("1000").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("65t").unwrap_err().contains("larger than 64t"));
    }

    #[test]
    fn grid_order_and_checks() {
        let dir = tempfile::tempdir().unwrap();
        let p = plan(dir.path());
        p.check().unwrap();
        let points = p.points();
        assert_eq!(points.len(), 2 * 2 * 2);
        assert_eq!(points[0], Point { mode: Mode::RandRead, block_size: 4096, queue_depth: 1 });
        assert_eq!(points[1].queue_depth, 4);
        assert_eq!(points[2].block_size, 1 << 20);
        assert_eq!(points[4].mode, Mode::Mixed);
        assert_eq!(points[3].label(), "randread 1m QD4");

        let small = IoPlan { size_bytes: 512 << 10, ..p.clone() };
        assert_eq!(invalid(&small), "invalid --size 512k: smaller than the largest block size 1m (--block-sizes)");
        let missing = IoPlan { file: dir.path().join("nope/f.bench"), ..p.clone() };
        let m = invalid(&missing);
        assert!(m.starts_with("invalid --file ") && m.contains("nope does not exist"), "{m}");
        let is_dir = IoPlan { file: dir.path().to_path_buf(), ..p.clone() };
        assert!(invalid(&is_dir).contains("is a directory"));
        assert!(invalid(&IoPlan { modes: vec![], ..p.clone() }).contains("--mode"));
        assert!(invalid(&IoPlan { queue_depths: vec![0], ..p.clone() }).contains("--queue-depths"));
        assert!(invalid(&IoPlan { block_sizes: vec![3000], ..p.clone() }).contains("--block-sizes"));
        assert!(invalid(&IoPlan { read_pct: 101, ..p.clone() }).contains("--read-pct"));
        assert!(invalid(&IoPlan { duration: Duration::ZERO, ..p.clone() }).contains("--duration"));
        assert!(invalid(&IoPlan { fsync_every: Some(0), ..p.clone() }).contains("--fsync-every"));
        // A bare file name lives in the current directory, which exists.
        IoPlan { file: PathBuf::from("bare.bench"), ..p }.check().unwrap();
    }
}
