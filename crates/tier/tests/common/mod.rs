//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use pgtier_tier::{Admission, DirectIo, FlashStore, OpenReport, TierConfig};

/// 64 KiB regions: small enough that a test fills and reclaims many.
pub const SMALL_REGION: u32 = 64 << 10;

pub fn config(dir: &Path, regions: u64) -> TierConfig {
    TierConfig {
        path: dir.join("flash.tier"),
        size: regions * u64::from(SMALL_REGION),
        region_size: SMALL_REGION,
        direct_io: DirectIo::Auto,
        mean_record_bytes: 128,
        admission: Admission::All,
    }
}

pub fn open(config: &TierConfig, token: &[u8]) -> (FlashStore, OpenReport) {
    FlashStore::open(config, token).expect("open")
}

pub fn key(i: u64) -> Vec<u8> {
    format!("key-{i:08}").into_bytes()
}

/// A value that names its key and version, of length `len`.
pub fn value(i: u64, version: u64, len: usize) -> Vec<u8> {
    let mut v = format!("v{i}.{version}:").into_bytes();
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ version;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v.truncate(len);
    v
}

pub fn path_of(dir: &Path) -> PathBuf {
    dir.join("flash.tier")
}

/// The version `value` encoded in `v` if `v` is exactly `value(i, version, len)`.
pub fn version_of(i: u64, v: &[u8]) -> Option<u64> {
    let head = String::from_utf8_lossy(&v[..v.len().min(40)]).into_owned();
    let version = head.strip_prefix(&format!("v{i}."))?.split(':').next()?.parse().ok()?;
    (v == value(i, version, v.len()).as_slice()).then_some(version)
}
