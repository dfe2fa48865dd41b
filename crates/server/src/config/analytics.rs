//! `[analytics]`: what the analytic executor (crates/olap, "Executor
//! resources") may take from the machine: a share of the CPUs at a lower
//! priority, optionally pinned, and a memory bound. Applied before any
//! database opens (`pgtier_sql::session::set_analytics_config`).

use pgtier_olap::{OlapConfig, Placement};
use serde::Deserialize;

use crate::ServerError;

/// Below this a bound is surely a slip ("512" meant as MB): every analytic
/// query would fail.
const MEMORY_LIMIT_MIN: u64 = 1 << 20;

/// `[analytics]`, mapped to `pgtier_olap::OlapConfig` by [`AnalyticsSection::to_olap_config`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnalyticsSection {
    /// Share of the online CPUs the executor runs threads on, in (0, 1] (default 0.5).
    pub cpu_share: Option<f64>,
    /// Added to the executor threads' nice value, 0..=19 (default 5).
    pub nice: Option<i64>,
    /// Run the executor and the merger under SCHED_IDLE instead of `nice`
    /// (default false).
    pub sched_idle: Option<bool>,
    /// `none` (default), `round_robin`, `fill_first` or `pack`.
    pub placement: Option<String>,
    /// Memory DataFusion's operators may hold, PostgreSQL's units ("1GB");
    /// unbounded without it.
    pub memory_limit: Option<String>,
}

impl AnalyticsSection {
    /// The executor's settings; a bad value is an error naming its key.
    pub fn to_olap_config(&self) -> Result<OlapConfig, ServerError> {
        let bad = |m: String| Err(ServerError::Config(format!("[analytics] {m}")));
        let mut config = OlapConfig::default();
        if let Some(share) = self.cpu_share {
            if !(share > 0.0 && share <= 1.0) {
                return bad(format!("cpu_share must be in (0, 1], not {share}"));
            }
            config.cpu_share = share;
        }
        if let Some(nice) = self.nice {
            match i32::try_from(nice) {
                Ok(n) if (0..=19).contains(&n) => config.nice = n,
                _ => return bad(format!("nice must be 0 to 19, not {nice}")),
            }
        }
        if let Some(idle) = self.sched_idle {
            config.sched_idle = idle;
        }
        if let Some(name) = &self.placement {
            let Some(placement) = Placement::parse(name) else {
                let names: Vec<String> = Placement::NAMES.iter().map(|n| format!("\"{n}\"")).collect();
                return bad(format!("placement must be one of {}, not \"{name}\"", names.join(", ")));
            };
            config.placement = placement;
        }
        if let Some(text) = &self.memory_limit {
            let bytes = match pgtier_cache::CreateGroup::parse_memory_size(text) {
                Ok(bytes) if bytes < MEMORY_LIMIT_MIN => return bad("memory_limit must be at least 1MB".into()),
                Ok(bytes) => bytes,
                Err(e) => return bad(format!("memory_limit: {e}")),
            };
            match usize::try_from(bytes) {
                Ok(bytes) => config.memory_limit = Some(bytes),
                Err(_) => return bad(format!("memory_limit \"{text}\" is out of range")),
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServerConfig;

    fn section(toml: &str) -> AnalyticsSection {
        ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n[analytics]\n{toml}")).unwrap().analytics
    }

    #[test]
    fn the_analytics_section_is_checked_key_by_key() {
        let default = section("").to_olap_config().unwrap();
        assert_eq!(
            (
                default.cpu_share,
                default.nice,
                default.sched_idle,
                default.placement,
                default.memory_limit,
                default.threads
            ),
            (0.5, 5, false, Placement::None, None, 0)
        );
        let set = section(
            "cpu_share = 0.25\nnice = 0\nsched_idle = true\nplacement = \"fill_first\"\nmemory_limit = \"2GB\"",
        )
        .to_olap_config()
        .unwrap();
        assert_eq!(
            (set.cpu_share, set.nice, set.sched_idle, set.placement, set.memory_limit),
            (0.25, 0, true, Placement::FillFirst, Some(2 << 30))
        );
        for (name, placement) in
            [("none", Placement::None), ("round_robin", Placement::RoundRobin), ("pack", Placement::Pack)]
        {
            let p = section(&format!("placement = \"{name}\"")).to_olap_config().unwrap().placement;
            assert_eq!(p, placement);
        }
        for (toml, key) in [
            ("cpu_share = 0.0", "cpu_share must be in (0, 1], not 0"),
            ("cpu_share = 1.5", "cpu_share must be in (0, 1], not 1.5"),
            ("nice = -1", "nice must be 0 to 19, not -1"),
            ("nice = 20", "nice must be 0 to 19, not 20"),
            ("placement = \"spread\"", "placement must be one of \"none\", \"round_robin\", \"fill_first\", \"pack\""),
            ("memory_limit = \"lots\"", "memory_limit: invalid memory size \"lots\""),
            ("memory_limit = \"512\"", "memory_limit must be at least 1MB"),
        ] {
            let e = section(toml).to_olap_config().unwrap_err().to_string();
            assert!(e.contains(&format!("[analytics] {key}")), "{toml}: {e}");
            // validate() (startup, reload) refuses it too.
            let config = ServerConfig::from_toml_str(&format!("data_dir = \"d\"\n[analytics]\n{toml}")).unwrap();
            let e = config.validate().unwrap_err().to_string();
            assert!(e.contains("[analytics]"), "{toml}: {e}");
        }
        let e = ServerConfig::from_toml_str("data_dir = \"d\"\n[analytics]\nthreads = 2").unwrap_err().to_string();
        assert!(e.contains("unknown field `threads`"), "{e}");
    }
}
