//! Session settings: their defaults, which ones are read-only, how a new
//! value is checked and normalized (`SET`, `set_config`), and the fixed
//! facts `current_setting` and `pg_settings` report. Below both the session
//! (`SET`/`SHOW`) and the catalog and system functions that read settings,
//! so neither reaches into the other.

use std::collections::HashMap;

use crate::error::{Result, SqlError};

/// Session settings drivers set and read (`SET`/`SHOW`).
pub(crate) fn default_settings() -> HashMap<String, String> {
    let pairs = [
        ("application_name", ""),
        ("client_encoding", "UTF8"),
        ("datestyle", "ISO, MDY"),
        ("default_transaction_isolation", "read committed"),
        ("default_transaction_read_only", "off"),
        ("extra_float_digits", "1"),
        ("integer_datetimes", "on"),
        ("intervalstyle", "postgres"),
        ("is_superuser", "on"),
        ("lc_messages", "C"),
        ("search_path", "\"$user\", public"),
        ("server_encoding", "UTF8"),
        ("server_version", "15.0 (pgtier)"),
        ("standard_conforming_strings", "on"),
        ("statement_timeout", "0"),
        ("synchronous_commit", "on"),
        ("timezone", "UTC"),
        ("transaction_isolation", "read committed"),
        ("transaction_read_only", "off"),
        ("lock_timeout", "0"),
        ("idle_in_transaction_session_timeout", "0"),
        ("bytea_output", "hex"),
        ("max_identifier_length", "63"),
        // Who and where, for current_user/current_database(); the server sets
        // them from the startup packet (`Connection::set_identity`).
        ("session_authorization", "postgres"),
        ("pgtier.database", "postgres"),
    ];
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// Settings a session may not change (55P02); all others it may.
pub(crate) const READ_ONLY_SETTINGS: [&str; 5] = ["server_version", "server_encoding", "integer_datetimes", "is_superuser", "max_identifier_length"];

/// `value` for `key` as the session keeps it, or PostgreSQL's error for a
/// value it refuses.
pub(crate) fn normalize_setting(key: &str, value: &str) -> Result<String> {
    let invalid = || SqlError::new("22023", format!("invalid value for parameter \"{key}\": \"{value}\""));
    Ok(match key {
        "client_encoding" => {
            let v = value.to_uppercase().replace('-', "");
            if v != "UTF8" && v != "UNICODE" {
                return Err(SqlError::unsupported(format!("client_encoding {value}")));
            }
            "UTF8".to_owned()
        }
        "datestyle" => {
            let parts: Vec<String> = value.split(',').map(|p| p.trim().to_uppercase()).collect();
            let style = if parts.iter().any(|p| p == "ISO") { "ISO" } else { return Err(SqlError::unsupported(format!("DateStyle {value}"))) };
            let order = parts.iter().find(|p| ["MDY", "DMY", "YMD"].contains(&p.as_str())).cloned().unwrap_or_else(|| "MDY".to_owned());
            format!("{style}, {order}")
        }
        "extra_float_digits" => {
            let n: i32 = value.trim().parse().map_err(|_| SqlError::new("22023", format!("invalid value for parameter \"{key}\": \"{value}\"")))?;
            if !(-15..=3).contains(&n) {
                return Err(SqlError::new("22023", format!("{n} is outside the valid range for parameter \"extra_float_digits\" (-15 .. 3)")));
            }
            n.to_string()
        }
        "timezone" => {
            let v = value.trim();
            if !(v.eq_ignore_ascii_case("utc") || v.eq_ignore_ascii_case("gmt") || v == "0" || v.eq_ignore_ascii_case("etc/utc")) {
                return Err(SqlError::unsupported(format!("TimeZone {value} (only UTC)")));
            }
            if v.eq_ignore_ascii_case("utc") { "UTC".to_owned() } else { v.to_owned() }
        }
        "standard_conforming_strings" => match value.to_lowercase().as_str() {
            "on" | "true" | "1" => "on".to_owned(),
            "off" | "false" | "0" => return Err(SqlError::unsupported("standard_conforming_strings = off")),
            _ => return Err(invalid()),
        },
        "synchronous_commit" => match value.trim().to_lowercase().as_str() {
            "on" | "true" | "yes" | "1" => "on".to_owned(),
            "off" | "false" | "no" | "0" => "off".to_owned(),
            v @ ("local" | "remote_write" | "remote_apply") => v.to_owned(),
            _ => return Err(invalid()),
        },
        "transaction_isolation" | "default_transaction_isolation" => {
            if value.to_lowercase() != "read committed" {
                return Err(SqlError::unsupported(format!("isolation level {value}")));
            }
            "read committed".to_owned()
        }
        _ => value.to_owned(),
    })
}

pub(crate) fn setting_value(settings: &HashMap<String, String>, key: &str) -> Option<String> {
    let key = match key {
        "time zone" => "timezone",
        other => other,
    };
    if let Some(v) = settings.get(key) {
        return Some(v.clone());
    }
    FIXED_SETTINGS.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_owned())
}

/// Read-only settings with fixed values (current_setting, pg_settings).
pub const FIXED_SETTINGS: &[(&str, &str)] = &[
    ("block_size", "8192"),
    ("data_directory_mode", "0700"),
    ("lc_collate", "C"),
    ("lc_ctype", "C"),
    ("max_connections", "100"),
    ("max_identifier_length", "63"),
    ("max_index_keys", "32"),
    ("server_version_num", "150000"),
];

/// The name PostgreSQL shows for a setting (`DateStyle`, `TimeZone`).
pub fn setting_display_name(key: &str) -> &str {
    match key {
        "datestyle" => "DateStyle",
        "timezone" => "TimeZone",
        "intervalstyle" => "IntervalStyle",
        other => other,
    }
}

/// Schemas of the search path that exist (`$user` never does here).
pub(crate) fn search_path(settings: &HashMap<String, String>) -> Vec<String> {
    let path = settings.get("search_path").cloned().unwrap_or_default();
    path.split(',')
        .map(|s| s.trim().trim_matches('"').to_owned())
        .filter(|s| matches!(s.as_str(), "public" | "pg_catalog" | "information_schema"))
        .collect()
}
