//! The block device under a path and its I/O counters (`/proc/diskstats`),
//! so a run can say how many reads and writes reached the device, not only
//! what the program asked for. One figure per name, found or reported
//! missing with the reason, never guessed.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// `/proc/diskstats` counts sectors of 512 bytes whatever the device's own size.
const DISKSTATS_SECTOR_BYTES: u64 = 512;

/// A block device as `/proc/diskstats` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    /// What the device was found from, for the report.
    pub found_from: String,
}

/// Device I/O over a window (from `/proc/diskstats`: completed requests and
/// sectors; merged requests count once, as the device saw them).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DiskFigures {
    pub read_iops: f64,
    pub write_iops: f64,
    /// 10^6 bytes per second.
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
}

impl DiskFigures {
    pub fn between(a: &DiskCounters, b: &DiskCounters, window_s: f64) -> DiskFigures {
        let rate = |x: u64, y: u64| y.saturating_sub(x) as f64 / window_s;
        DiskFigures {
            read_iops: rate(a.reads, b.reads),
            write_iops: rate(a.writes, b.writes),
            read_mb_per_s: rate(a.sectors_read, b.sectors_read) * DISKSTATS_SECTOR_BYTES as f64 / 1e6,
            write_mb_per_s: rate(a.sectors_written, b.sectors_written) * DISKSTATS_SECTOR_BYTES as f64 / 1e6,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskCounters {
    reads: u64,
    sectors_read: u64,
    writes: u64,
    sectors_written: u64,
}

impl DiskCounters {
    /// Read requests completed since boot.
    pub fn reads(&self) -> u64 {
        self.reads
    }
}

/// One device's line of `/proc/diskstats`: major minor name reads merged
/// sectors ms writes merged sectors ms ...
fn parse_diskstats(text: &str, major: u32, minor: u32) -> Option<(String, DiskCounters)> {
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 || f[0].parse::<u32>().ok()? != major || f[1].parse::<u32>().ok()? != minor {
            return None;
        }
        let n = |i: usize| f[i].parse::<u64>().ok();
        Some((
            f[2].to_owned(),
            DiskCounters { reads: n(3)?, sectors_read: n(5)?, writes: n(7)?, sectors_written: n(9)? },
        ))
    })
}

/// The device's counters now.
pub fn disk_counters(device: &BlockDevice) -> Result<DiskCounters, String> {
    let text = std::fs::read_to_string("/proc/diskstats").map_err(|e| format!("reading /proc/diskstats: {e}"))?;
    parse_diskstats(&text, device.major, device.minor)
        .map(|(_, c)| c)
        .ok_or_else(|| format!("device {} left /proc/diskstats", device.name))
}

/// The block device `path` lives on (or is, for a block device node), as
/// `/proc/diskstats` lists it; the reason when there is none (overlay,
/// tmpfs and btrfs report a device number no disk has).
pub fn device_of(path: &Path) -> Result<BlockDevice, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let text = std::fs::read_to_string("/proc/diskstats").map_err(|e| format!("reading /proc/diskstats: {e}"))?;
    match parse_diskstats(&text, major, minor) {
        Some((name, _)) => Ok(BlockDevice { name, major, minor, found_from: path.display().to_string() }),
        None => Err(format!("{} is on device {major}:{minor}, which /proc/diskstats does not list", path.display())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn diskstats_lines() {
        let text = "   7       0 loop0 190942 0 1527536 3047 0 0 0 0 0 2844 3047 0 0 0 0 0 0\n \
                    254       0 vda 110072395 191013 3316590570 44265791 75088860 1202839 7745615736 27832677 0 1 2\n";
        let (name, c) = parse_diskstats(text, 254, 0).unwrap();
        assert_eq!(name, "vda");
        assert_eq!(
            c,
            DiskCounters { reads: 110072395, sectors_read: 3316590570, writes: 75088860, sectors_written: 7745615736 }
        );
        assert!(parse_diskstats(text, 8, 0).is_none());
        let a = DiskCounters { reads: 10, sectors_read: 2000, writes: 0, sectors_written: 0 };
        let b = DiskCounters { reads: 30, sectors_read: 6000, writes: 4, sectors_written: 8 };
        let f = DiskFigures::between(&a, &b, 2.0);
        assert_eq!((f.read_iops, f.write_iops), (10.0, 2.0));
        assert!((f.read_mb_per_s - 2000.0 * 512.0 / 1e6).abs() < 1e-9);
    }

    #[test]
    fn devices_of_paths() {
        // The current directory is on some file system; whether it has a
        // block device depends on the machine, but the answer is never a guess.
        match device_of(Path::new(".")) {
            Ok(d) => assert!(!d.name.is_empty()),
            Err(why) => assert!(why.contains("does not list"), "{why}"),
        }
        assert!(device_of(Path::new("/no/such/path")).is_err());
    }
}
