//! Planner and cost settings (enable_hashagg, jit_above_cost, work_mem,
//! max_parallel_workers_per_gather, ...). They choose PostgreSQL's plans and
//! never change an answer, and test suites and tools set them around their
//! queries, often inside a transaction block, where refusing one aborts the
//! block. pgtier keeps their values for SHOW / current_setting with
//! PostgreSQL's checks and spelling, and plans as it always does.

use crate::error::{Result, SqlError};
use crate::value::parse_bool;

#[derive(Clone, Copy)]
enum Kind {
    Bool,
    /// An integer in `min ..= max`.
    Int(i32, i32),
    /// A non-negative real (shown as %g).
    Real,
    /// A memory size in kB, at least `min` kB.
    Kb(u32),
    /// A size in 8 kB blocks (min_parallel_*_scan_size).
    Blocks,
    /// One of the values listed, matched ignoring case; with `true`, also
    /// the hidden Boolean spellings guc_tables.c lists for the setting
    /// (`true`, `yes`, `1` are `on`; `false`, `no`, `0` are `off`).
    Enum(&'static [&'static str], bool),
}

const SETTINGS: &[(&str, &str, Kind)] = &[
    ("enable_async_append", "on", Kind::Bool),
    ("enable_bitmapscan", "on", Kind::Bool),
    ("enable_gathermerge", "on", Kind::Bool),
    ("enable_hashagg", "on", Kind::Bool),
    ("enable_hashjoin", "on", Kind::Bool),
    ("enable_incremental_sort", "on", Kind::Bool),
    ("enable_indexonlyscan", "on", Kind::Bool),
    ("enable_indexscan", "on", Kind::Bool),
    ("enable_material", "on", Kind::Bool),
    ("enable_memoize", "on", Kind::Bool),
    ("enable_mergejoin", "on", Kind::Bool),
    ("enable_nestloop", "on", Kind::Bool),
    ("enable_parallel_append", "on", Kind::Bool),
    ("enable_parallel_hash", "on", Kind::Bool),
    ("enable_partition_pruning", "on", Kind::Bool),
    ("enable_partitionwise_aggregate", "off", Kind::Bool),
    ("enable_partitionwise_join", "off", Kind::Bool),
    ("enable_seqscan", "on", Kind::Bool),
    ("enable_sort", "on", Kind::Bool),
    ("enable_tidscan", "on", Kind::Bool),
    ("escape_string_warning", "on", Kind::Bool),
    ("jit", "on", Kind::Bool),
    ("parallel_leader_participation", "on", Kind::Bool),
    ("jit_above_cost", "100000", Kind::Real),
    ("jit_inline_above_cost", "500000", Kind::Real),
    ("jit_optimize_above_cost", "500000", Kind::Real),
    ("cpu_index_tuple_cost", "0.005", Kind::Real),
    ("cpu_operator_cost", "0.0025", Kind::Real),
    ("cpu_tuple_cost", "0.01", Kind::Real),
    ("parallel_setup_cost", "1000", Kind::Real),
    ("parallel_tuple_cost", "0.1", Kind::Real),
    ("random_page_cost", "4", Kind::Real),
    ("seq_page_cost", "1", Kind::Real),
    ("max_parallel_workers_per_gather", "2", Kind::Int(0, 1024)),
    ("max_parallel_workers", "8", Kind::Int(0, 1024)),
    ("work_mem", "4MB", Kind::Kb(64)),
    ("hash_mem_multiplier", "2", Kind::Real),
    ("min_parallel_table_scan_size", "8MB", Kind::Blocks),
    ("min_parallel_index_scan_size", "512kB", Kind::Blocks),
    ("geqo", "on", Kind::Bool),
    ("geqo_threshold", "12", Kind::Int(2, i32::MAX)),
    ("geqo_effort", "5", Kind::Int(1, 10)),
    ("geqo_pool_size", "0", Kind::Int(0, i32::MAX)),
    ("geqo_generations", "0", Kind::Int(0, i32::MAX)),
    ("from_collapse_limit", "8", Kind::Int(1, i32::MAX)),
    ("join_collapse_limit", "8", Kind::Int(1, i32::MAX)),
    ("default_statistics_target", "100", Kind::Int(1, 10000)),
    ("effective_io_concurrency", "1", Kind::Int(0, 1000)),
    ("max_parallel_maintenance_workers", "2", Kind::Int(0, 1024)),
    ("maintenance_work_mem", "64MB", Kind::Kb(1024)),
    ("force_parallel_mode", "off", Kind::Enum(&["off", "on", "regress"], true)),
    ("constraint_exclusion", "partition", Kind::Enum(&["partition", "on", "off"], true)),
    ("plan_cache_mode", "auto", Kind::Enum(&["auto", "force_generic_plan", "force_custom_plan"], false)),
];

/// The settings with their defaults, as SHOW prints them.
pub(crate) fn defaults() -> impl Iterator<Item = (&'static str, &'static str)> {
    SETTINGS.iter().map(|(k, v, _)| (*k, *v))
}

/// Some(checked value) for one of these settings, None for another key.
pub(crate) fn normalize(key: &str, value: &str) -> Option<Result<String>> {
    let (_, _, kind) = SETTINGS.iter().find(|(k, _, _)| *k == key)?;
    Some(check(key, value, *kind))
}

fn check(key: &str, value: &str, kind: Kind) -> Result<String> {
    let invalid = || SqlError::new("22023", format!("invalid value for parameter \"{key}\": \"{value}\""));
    match kind {
        Kind::Bool => parse_bool(value)
            .map(|b| if b { "on" } else { "off" }.to_owned())
            .ok_or_else(|| SqlError::new("22023", format!("parameter \"{key}\" requires a Boolean value"))),
        Kind::Int(min, max) => {
            let n: i32 = value.trim().parse().map_err(|_| invalid())?;
            if !(min..=max).contains(&n) {
                return Err(SqlError::new(
                    "22023",
                    format!("{n} is outside the valid range for parameter \"{key}\" ({min} .. {max})"),
                ));
            }
            Ok(n.to_string())
        }
        Kind::Real => {
            let x: f64 = value.trim().parse().map_err(|_| invalid())?;
            if !x.is_finite() || x < 0.0 {
                return Err(invalid());
            }
            // SHOW prints %g; Rust's shortest form is the same for up to six
            // significant digits between 1e-4 and 1e6.
            let shown = x.to_string();
            let digits = shown.bytes().filter(u8::is_ascii_digit).skip_while(|b| *b == b'0').count();
            if x != 0.0 && (!(1e-4..1e6).contains(&x) || digits > 6) {
                return Err(SqlError::unsupported(format!(
                    "{key} = {value} (shown differently than PostgreSQL would)"
                )));
            }
            Ok(shown)
        }
        Kind::Kb(min) => {
            let kb = crate::settings::parse_kb(key, value)?;
            if kb < min {
                return Err(SqlError::new(
                    "22023",
                    format!("{kb} kB is outside the valid range for parameter \"{key}\" ({min} .. 2147483647)"),
                ));
            }
            Ok(crate::settings::format_kb(kb))
        }
        Kind::Blocks => {
            // Without a unit the number counts 8 kB blocks.
            let kb = if value.trim().bytes().all(|b| b.is_ascii_digit()) {
                value.trim().parse::<u32>().ok().and_then(|n| n.checked_mul(8)).ok_or_else(invalid)?
            } else {
                crate::settings::parse_kb(key, value)?
            };
            if kb % 8 != 0 {
                return Err(SqlError::unsupported(format!("{key} = {value} (not a whole number of blocks)")));
            }
            Ok(crate::settings::format_kb(kb))
        }
        Kind::Enum(values, bools) => {
            let v = value.to_lowercase();
            if let Some(found) = values.iter().find(|x| **x == v) {
                return Ok((*found).to_owned());
            }
            match v.as_str() {
                "true" | "yes" | "1" if bools => Ok("on".to_owned()),
                "false" | "no" | "0" if bools => Ok("off".to_owned()),
                _ => Err(invalid().with_hint(format!("Available values: {}.", values.join(", ")))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_postgresql_shows_them() {
        let ok = |k: &str, v: &str| normalize(k, v).and_then(Result::ok);
        assert_eq!(ok("enable_sort", "false").as_deref(), Some("off"));
        assert_eq!(ok("enable_hashagg", "TRUE").as_deref(), Some("on"));
        assert_eq!(ok("enable_hashjoin", "0").as_deref(), Some("off"));
        assert_eq!(ok("enable_hashjoin", "of").as_deref(), Some("off"));
        assert!(ok("enable_hashjoin", "o").is_none());
        assert_eq!(ok("jit_above_cost", "0").as_deref(), Some("0"));
        assert_eq!(ok("parallel_tuple_cost", "0.1").as_deref(), Some("0.1"));
        assert_eq!(ok("work_mem", "64kB").as_deref(), Some("64kB"));
        assert_eq!(ok("work_mem", "65536").as_deref(), Some("64MB"));
        assert!(ok("work_mem", "32kB").is_none());
        assert_eq!(ok("min_parallel_table_scan_size", "0").as_deref(), Some("0"));
        assert_eq!(ok("min_parallel_table_scan_size", "1024").as_deref(), Some("8MB"));
        assert_eq!(ok("max_parallel_workers_per_gather", "4").as_deref(), Some("4"));
        assert!(ok("max_parallel_workers_per_gather", "-1").is_none());
        assert!(normalize("no_such_setting", "1").is_none());
        assert_eq!(ok("force_parallel_mode", "Regress").as_deref(), Some("regress"));
        assert_eq!(ok("force_parallel_mode", "yes").as_deref(), Some("on"));
        assert!(ok("force_parallel_mode", "y").is_none());
        assert!(ok("plan_cache_mode", "on").is_none());
        assert_eq!(ok("geqo_threshold", "2").as_deref(), Some("2"));
        assert!(ok("geqo_threshold", "1").is_none());
    }
}
