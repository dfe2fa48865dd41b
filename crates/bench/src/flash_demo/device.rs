//! The block device under a path and its I/O counters (`/proc/diskstats`),
//! so a run can say how many reads and writes reached the device, not only
//! what the program asked for.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `/proc/diskstats` counts sectors of 512 bytes whatever the device's own.
const SECTOR_BYTES: u64 = 512;

/// A block device by its `/proc/diskstats` name (`vda`, `nvme0n1p2`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub name: String,
}

/// Cumulative counters of one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
}

/// I/O of a device over a window, per second.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceDelta {
    pub device: String,
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_mb_s: f64,
    pub write_mb_s: f64,
}

impl Device {
    /// The device holding `path` (its nearest existing ancestor); None for
    /// file systems without one (tmpfs, overlay on nothing we can name).
    pub fn holding(path: &Path) -> Option<Device> {
        use std::os::unix::fs::MetadataExt;
        let existing = path.ancestors().find(|p| p.exists())?;
        let dev = std::fs::metadata(existing).ok()?.dev();
        // SAFETY: major/minor are pure arithmetic on the device number.
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?;
        let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?.to_owned();
        Some(Device { name })
    }

    pub fn read(&self) -> Option<DeviceCounters> {
        let stats = std::fs::read_to_string("/proc/diskstats").ok()?;
        parse_diskstats(&stats, &self.name)
    }
}

/// Fields (1-based, after major, minor, name): 4 reads completed, 6 sectors
/// read, 8 writes completed, 10 sectors written.
fn parse_diskstats(text: &str, name: &str) -> Option<DeviceCounters> {
    let line = text.lines().find(|l| l.split_whitespace().nth(2) == Some(name))?;
    let fields: Vec<u64> = line.split_whitespace().skip(3).map_while(|f| f.parse().ok()).collect();
    Some(DeviceCounters {
        reads: *fields.first()?,
        read_bytes: fields.get(2)? * SECTOR_BYTES,
        writes: *fields.get(4)?,
        write_bytes: fields.get(6)? * SECTOR_BYTES,
    })
}

impl DeviceCounters {
    pub fn delta(&self, later: &DeviceCounters, device: &Device, over: Duration) -> DeviceDelta {
        let s = over.as_secs_f64().max(1e-9);
        DeviceDelta {
            device: device.name.clone(),
            read_iops: later.reads.saturating_sub(self.reads) as f64 / s,
            write_iops: later.writes.saturating_sub(self.writes) as f64 / s,
            read_mb_s: later.read_bytes.saturating_sub(self.read_bytes) as f64 / s / 1e6,
            write_mb_s: later.write_bytes.saturating_sub(self.write_bytes) as f64 / s / 1e6,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn diskstats_lines_are_read_by_device_name() {
        let text = " 253       0 vda 1000 5 16000 300 2000 7 64000 900 0 1000 1200 0 0 0 0\n \
                    253       1 vda1 10 0 80 1 20 0 160 2 0 3 3 0 0 0 0\n";
        let vda = parse_diskstats(text, "vda").unwrap();
        assert_eq!(
            vda,
            DeviceCounters { reads: 1000, read_bytes: 16000 * 512, writes: 2000, write_bytes: 64000 * 512 }
        );
        assert_eq!(parse_diskstats(text, "vda1").unwrap().writes, 20);
        assert!(parse_diskstats(text, "sda").is_none());
    }

    #[test]
    fn the_device_of_this_source_tree_counts_io() {
        // Every machine that builds this has its sources on some device;
        // tmpfs-only sandboxes have none, which is what None means.
        if let Some(device) = Device::holding(Path::new(env!("CARGO_MANIFEST_DIR"))) {
            let counters = device.read().unwrap();
            assert!(counters.reads > 0, "{device:?}: {counters:?}");
        }
    }
}
