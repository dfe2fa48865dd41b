//! `[tier]`: the flash tier under memory (a section of `pgtier.toml`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::ServerError;

/// `[tier]`: the flash tier, mapped to `pgtier_cache::TierConfig` by [`TierSection::to_tier_config`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TierSection {
    /// The flash file (or block device); default `<data_dir>/flash.tier`.
    pub path: Option<PathBuf>,
    /// Its size in PostgreSQL's units ("8GB"); the tier is off without it.
    pub size: Option<String>,
    /// `clean` (only instances PostgreSQL has in full go to flash) or
    /// `write-back` (instances of AWT groups with changes not yet in
    /// PostgreSQL go too, durably).
    pub mode: Option<String>,
    /// `auto` (O_DIRECT when the filesystem allows it), `on` or `off`.
    pub direct_io: Option<String>,
    /// Flash regions, in PostgreSQL's units (default 16MB).
    pub region_size: Option<String>,
    /// `second-touch` (an instance goes to flash the second time it is
    /// evicted, so one scan does not flush the hot set) or `all`.
    pub admission: Option<String>,
    /// The mean record size the in-memory index is sized for, in bytes (default 512).
    pub mean_record_bytes: Option<u32>,
    /// Memory plain local tables (not in a cache group) may use, in
    /// PostgreSQL's units ("256MB"): above it, their rows not used lately
    /// move to flash, durably (needs `mode = "write-back"`). Unset: they
    /// stay in memory.
    pub local_tables: Option<String>,
}

impl TierSection {
    /// The tier's settings (None: no tier); a bad value is an error naming its key.
    pub fn to_tier_config(
        &self,
        data_dir: &Path,
    ) -> Result<Option<(pgtier_cache::TierConfig, pgtier_cache::TierMode)>, ServerError> {
        let bad = |m: String| Err(ServerError::Config(format!("[tier] {m}")));
        let Some(size) = &self.size else {
            if self.path.is_some() {
                return bad("size is missing: give the flash file's size (\"8GB\") to turn the tier on".into());
            }
            return Ok(None);
        };
        // Bounded below by the four regions checked further down: a tier of
        // a few MB is small, not wrong (the flash studies size it in
        // percent of the data).
        let size = match pgtier_cache::CreateGroup::parse_memory_size(size) {
            Ok(bytes) => bytes,
            Err(e) => return bad(format!("size: {e}")),
        };
        let mode = match self.mode.as_deref() {
            None | Some("clean") => pgtier_cache::TierMode::Clean,
            Some("write-back") => pgtier_cache::TierMode::WriteBack,
            Some(other) => return bad(format!("mode must be \"clean\" or \"write-back\", not \"{other}\"")),
        };
        let direct_io = match self.direct_io.as_deref() {
            None | Some("auto") => pgtier_cache::DirectIo::Auto,
            Some("on") => pgtier_cache::DirectIo::On,
            Some("off") => pgtier_cache::DirectIo::Off,
            Some(other) => return bad(format!("direct_io must be \"auto\", \"on\" or \"off\", not \"{other}\"")),
        };
        let region_size = match self.region_size.as_deref().map(pgtier_cache::CreateGroup::parse_memory_size) {
            None => 16 << 20,
            Some(Ok(bytes)) if (1 << 20..=256 << 20).contains(&bytes) && bytes.is_power_of_two() => bytes as u32,
            Some(Ok(_)) => return bad("region_size must be a power of two from 1MB to 256MB".into()),
            Some(Err(e)) => return bad(format!("region_size: {e}")),
        };
        if size < 4 * u64::from(region_size) {
            return bad(format!("size must be at least 4 regions ({} MB)", 4 * (region_size >> 20)));
        }
        let admission = match self.admission.as_deref() {
            None | Some("second-touch") => pgtier_cache::Admission::SecondTouch,
            Some("all") => pgtier_cache::Admission::All,
            Some(other) => return bad(format!("admission must be \"second-touch\" or \"all\", not \"{other}\"")),
        };
        if self.local_tables.is_some() && mode != pgtier_cache::TierMode::WriteBack {
            return bad("local_tables needs mode = \"write-back\": flash holds the only copy of those rows".into());
        }
        let mean_record_bytes = self.mean_record_bytes.unwrap_or(512);
        if !(32..=1 << 20).contains(&mean_record_bytes) {
            return bad(format!("mean_record_bytes must be 32 to 1048576, not {mean_record_bytes}"));
        }
        let path = match &self.path {
            Some(path) if path.is_relative() => data_dir.join(path),
            Some(path) => path.clone(),
            None => data_dir.join("flash.tier"),
        };
        let config = pgtier_cache::TierConfig { path, size, region_size, direct_io, mean_record_bytes, admission };
        Ok(Some((config, mode)))
    }

    /// `local_tables` in bytes (None: unset, or no tier); a bad size is an
    /// error naming the key.
    pub fn local_tables_budget(&self) -> Result<Option<u64>, ServerError> {
        let Some(text) = &self.local_tables else { return Ok(None) };
        if self.size.is_none() {
            return Err(ServerError::Config("[tier] local_tables needs the tier: set [tier] size".into()));
        }
        match pgtier_cache::CreateGroup::parse_memory_size(text) {
            Ok(0) => Err(ServerError::Config("[tier] local_tables must be more than 0".into())),
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) => Err(ServerError::Config(format!("[tier] local_tables: {e}"))),
        }
    }
}
