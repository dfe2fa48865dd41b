//! Session settings: their defaults, which ones are read-only, how a new
//! value is checked and normalized (`SET`, `set_config`), and the fixed
//! facts `current_setting` and `pg_settings` report. Below both the session
//! (`SET`/`SHOW`) and the catalog and system functions that read settings,
//! so neither reaches into the other.

pub(crate) mod planner;

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Result, SqlError};

/// Session settings drivers set and read (`SET`/`SHOW`).
pub(crate) fn default_settings() -> HashMap<String, String> {
    let pairs = [
        ("application_name", ""),
        ("client_encoding", "UTF8"),
        ("datestyle", "ISO, MDY"),
        ("default_text_search_config", "pg_catalog.english"),
        ("default_transaction_isolation", "read committed"),
        ("default_transaction_read_only", "off"),
        ("extra_float_digits", "1"),
        ("integer_datetimes", "on"),
        ("intervalstyle", "postgres"),
        ("is_superuser", "on"),
        ("lc_messages", "C"),
        ("lc_monetary", "C"),
        ("lc_numeric", "C"),
        ("lc_time", "C"),
        ("search_path", "\"$user\", public"),
        ("server_encoding", "UTF8"),
        ("server_version", "15.0 (pgtier)"),
        ("standard_conforming_strings", "on"),
        ("statement_timeout", "0"),
        ("synchronous_commit", "on"),
        ("timezone", "UTC"),
        ("timezone_abbreviations", "Default"),
        ("transaction_isolation", "read committed"),
        ("transaction_read_only", "off"),
        ("lock_timeout", "0"),
        ("idle_in_transaction_session_timeout", "0"),
        ("bytea_output", "hex"),
        ("max_identifier_length", "63"),
        // Who and where, for current_user/current_database(); the server sets
        // them from the startup packet (`Connection::set_identity`).
        ("session_authorization", "postgres"),
        // SET ROLE's role ("none": the session user's privileges).
        ("role", "none"),
        ("pgtier.database", "postgres"),
        // What one statement may hold in sorts, hash aggregates and
        // buffered results (exec::Interrupt::charge); 0: no bound.
        ("pgtier.statement_mem", "1GB"),
        // Where a SELECT over tables with a columnar copy runs
        // (exec/columnar): off, auto (scan-heavy ones) or on.
        ("pgtier.analytics", "auto"),
    ];
    pairs
        .iter()
        .copied()
        .chain(crate::settings::planner::defaults())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Settings a session may not change (55P02); all others it may.
pub(crate) const READ_ONLY_SETTINGS: [&str; 6] = [
    "server_version",
    "server_encoding",
    "integer_datetimes",
    "is_superuser",
    "max_identifier_length",
    crate::names::TEMP_SCHEMA_SETTING,
];

/// Settings only a superuser may change (PostgreSQL's PGC_SUSET ones
/// that pgtier keeps): 42501 for other roles.
pub(crate) const SUPERUSER_SETTINGS: [&str; 1] = ["lc_messages"];

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
        "datestyle" => crate::tz::normalize_datestyle(value, "ISO, MDY")?,
        // The text search functions read english as the default (expr/functions/textsearch.rs).
        "default_text_search_config" => match value.trim().to_ascii_lowercase().as_str() {
            "english" | "pg_catalog.english" => "pg_catalog.english".to_owned(),
            _ => return Err(SqlError::unsupported(format!("default_text_search_config = {value}"))),
        },
        "extra_float_digits" => {
            let n: i32 = value
                .trim()
                .parse()
                .map_err(|_| SqlError::new("22023", format!("invalid value for parameter \"{key}\": \"{value}\"")))?;
            if !(-15..=3).contains(&n) {
                return Err(SqlError::new(
                    "22023",
                    format!("{n} is outside the valid range for parameter \"extra_float_digits\" (-15 .. 3)"),
                ));
            }
            n.to_string()
        }
        "timezone" => crate::tz::setting_zone(value)
            .map(|(_, shown)| shown)
            .ok_or_else(|| SqlError::new("22023", format!("invalid value for parameter \"TimeZone\": \"{value}\"")))?,
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
        "statement_timeout" | "lock_timeout" | "idle_in_transaction_session_timeout" => {
            format_ms(parse_ms(key, value)?)
        }
        "pgtier.statement_mem" => format_kb(parse_kb(key, value)?),
        "pgtier.analytics" => AnalyticsMode::parse(value)
            .ok_or_else(|| invalid().with_hint("Available values: off, auto, on."))?
            .name()
            .to_owned(),
        "bytea_output" => match value.trim().to_lowercase().as_str() {
            v @ ("hex" | "escape") => v.to_owned(),
            _ => return Err(invalid().with_hint("Available values: escape, hex.")),
        },
        "intervalstyle" => match value.trim().to_lowercase().as_str() {
            v @ ("postgres" | "postgres_verbose" | "iso_8601" | "sql_standard") => v.to_owned(),
            _ => {
                return Err(
                    invalid().with_hint("Available values: postgres, postgres_verbose, sql_standard, iso_8601.")
                );
            }
        },
        // pgtier formats numbers, money and dates as the C locale does;
        // whether another locale exists is the server's to say.
        "lc_monetary" | "lc_numeric" | "lc_time" => match value {
            "C" | "POSIX" => value.to_owned(),
            other => return Err(SqlError::unsupported(format!("{key} = {other} (only the C locale)"))),
        },
        "timezone_abbreviations" => match value.trim() {
            "Default" => "Default".to_owned(),
            other => {
                return Err(SqlError::unsupported(format!(
                    "timezone_abbreviations {other} (only Default's abbreviations are known)"
                )));
            }
        },
        "transaction_isolation" | "default_transaction_isolation" => {
            if value.to_lowercase() != "read committed" {
                return Err(SqlError::unsupported(format!("isolation level {value}")));
            }
            "read committed".to_owned()
        }
        _ => match crate::settings::planner::normalize(key, value) {
            Some(checked) => checked?,
            None => value.to_owned(),
        },
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

/// Schemas of the search path that exist, where `made(name)` tells whether CREATE SCHEMA made a
/// schema of that name.
pub(crate) fn search_path_with(settings: &HashMap<String, String>, made: impl Fn(&str) -> bool) -> Vec<String> {
    let path = settings.get("search_path").cloned().unwrap_or_default();
    let user = settings.get("session_authorization").map_or("", String::as_str);
    crate::names::split_path(&path)
        .into_iter()
        .map(|s| if s == "$user" { user.to_owned() } else { s })
        .filter(|s| matches!(s.as_str(), "public" | "pg_catalog" | "information_schema") || made(s))
        .collect()
}

/// A setting with a unit, as guc.c's parse_int reads one and SHOW prints
/// it: its base unit (no unit written means it), and the units PostgreSQL
/// accepts with their size in base units, largest first.
struct Units {
    base: &'static str,
    units: &'static [(&'static str, f64)],
    hint: &'static str,
}

const MS: Units = Units {
    base: "ms",
    units: &[("d", 86_400_000.0), ("h", 3_600_000.0), ("min", 60_000.0), ("s", 1000.0), ("ms", 1.0), ("us", 0.001)],
    hint: "Valid units for this parameter are \"us\", \"ms\", \"s\", \"min\", \"h\", and \"d\".",
};

const KB: Units = Units {
    base: "kB",
    units: &[("TB", 1_073_741_824.0), ("GB", 1_048_576.0), ("MB", 1024.0), ("kB", 1.0), ("B", 1.0 / 1024.0)],
    hint: "Valid units for this parameter are \"B\", \"kB\", \"MB\", \"GB\", and \"TB\".",
};

impl Units {
    /// A number (decimals allowed), an optional unit, rounded half to even
    /// to the base unit (PostgreSQL's rint: '0.5ms' is 0), 0 .. 2147483647.
    fn parse(&self, key: &str, value: &str) -> Result<u32> {
        let invalid = || SqlError::new("22023", format!("invalid value for parameter \"{key}\": \"{value}\""));
        let v = value.trim();
        let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(v.len());
        let (number, unit) = (&v[..split], v[split..].trim());
        let n: f64 = number.parse().map_err(|_| invalid())?;
        let scale = match unit {
            "" => 1.0,
            u => match self.units.iter().find(|(name, _)| *name == u) {
                Some((_, size)) => *size,
                None => return Err(invalid().with_hint(self.hint)),
            },
        };
        let x = (n * scale).round_ties_even();
        if !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&x) {
            return Err(invalid().with_hint("Value exceeds integer range."));
        }
        if x < 0.0 {
            return Err(SqlError::new(
                "22023",
                format!("{x} {} is outside the valid range for parameter \"{key}\" (0 .. 2147483647)", self.base),
            ));
        }
        // In range and rounded: the cast is exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(x as u32)
    }

    /// `n` base units in the largest unit that divides it exactly.
    fn format(&self, n: u32) -> String {
        if n == 0 {
            return "0".to_owned();
        }
        for (unit, size) in self.units {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let size = *size as u32;
            if size >= 1 && n.is_multiple_of(size) {
                return format!("{}{unit}", n / size);
            }
        }
        format!("{n}{}", self.base)
    }
}

/// A time setting's value in milliseconds (statement_timeout & co).
pub(crate) fn parse_ms(key: &str, value: &str) -> Result<u32> {
    MS.parse(key, value)
}

/// `ms` as SHOW prints it (`1500ms`, `1min`).
pub(crate) fn format_ms(ms: u32) -> String {
    MS.format(ms)
}

/// A memory setting's value in kB, as work_mem is read.
pub(crate) fn parse_kb(key: &str, value: &str) -> Result<u32> {
    KB.parse(key, value)
}

/// `kb` as SHOW prints it (`64kB`, `1GB`).
pub(crate) fn format_kb(kb: u32) -> String {
    KB.format(kb)
}

/// A session's settings: the text of each (`SHOW`, `current_setting`,
/// `pg_settings`) and, kept in step by [`Settings::set`], the typed values
/// statements read on every run (statement_timeout), so the executor never
/// looks a setting up by name. Every write goes through `set`: readers get
/// the map through `Deref`, never `DerefMut`.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Shared until written (`Arc::make_mut`): a SAVEPOINT keeps a copy of
    /// the settings (session/savepoint.rs) for the cost of two refcounts.
    values: Arc<HashMap<String, String>>,
    /// Defaults the server's configuration gives (`SET x TO DEFAULT`, `RESET`).
    defaults: Arc<HashMap<String, String>>,
    /// statement_timeout in ms; 0: none.
    statement_timeout_ms: u32,
    /// idle_in_transaction_session_timeout in ms; 0: none.
    idle_in_transaction_timeout_ms: u32,
    /// pgtier.statement_mem in kB; 0: no bound.
    statement_mem_kb: u32,
    /// pgtier.analytics.
    analytics: AnalyticsMode,
    /// Inside a transaction block: each setting's value before the block's
    /// first change, whether a SET LOCAL changed it, and its last
    /// session-level value; COMMIT and ROLLBACK resolve them (`end_block`).
    block_undo: Vec<BlockUndo>,
    in_block: bool,
    /// TimeZone and DateStyle as the date/time code reads them (tz.rs);
    /// None for UTC with `ISO, MDY`.
    datetime: Option<Arc<crate::tz::DtCtx>>,
    /// search_path's value, shared with the plans bound under it
    /// (plan::Prepared::search_path): comparing is a pointer test.
    search_path: Arc<str>,
    /// Who the session is for privilege checks (catalog/roles.rs): not a
    /// setting, so no SET reaches it.
    auth: SessionAuth,
}

/// Who the session is, as privilege checks need it (catalog/roles.rs).
/// Kept with the settings (which every statement and system function
/// reaches) but not a setting: nothing a client sends can change
/// `trusted` or `authenticated`.
#[derive(Clone, Debug)]
pub struct SessionAuth {
    /// Not authenticated by the server: the embedded API's caller, who
    /// owns the data directory. A superuser whatever its name.
    pub trusted: bool,
    /// The role that logged in (SET SESSION AUTHORIZATION needs it to be
    /// a superuser, as PostgreSQL's `AuthenticatedUserId`); also the owner
    /// of what has no recorded owner when no bootstrap role exists.
    pub authenticated: String,
    /// The parsed roles document and the engine table it came from
    /// (catalog/roles.rs `session_doc`; opaque here, below the catalog).
    pub doc_cache: Option<(Arc<pgtier_engine::TableSchema>, Arc<dyn std::any::Any + Send + Sync>)>,
    /// The `Catalog::names_stamp` under which the current role was found
    /// to need no privilege check (no roles stored, or a superuser): a
    /// statement under the same stamp skips the check with one integer
    /// comparison (the roles document is an annotation, and replacing one
    /// changes the stamp). Cleared when `role` or `session_authorization`
    /// changes (`Settings::store`) or the server logs the session in.
    pub unchecked_at: Option<u64>,
}

impl Default for SessionAuth {
    fn default() -> SessionAuth {
        SessionAuth { trusted: true, authenticated: "postgres".to_owned(), doc_cache: None, unchecked_at: None }
    }
}

/// `pgtier.analytics`: whether a SELECT reading only tables with a
/// columnar copy runs on it (exec/columnar has the rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnalyticsMode {
    /// Always the row path.
    Off,
    /// The columnar path when the plan scans a table whole.
    Auto,
    /// The columnar path whenever the plan can run there.
    On,
}

impl AnalyticsMode {
    fn parse(value: &str) -> Option<AnalyticsMode> {
        match value.trim().to_ascii_lowercase().as_str() {
            "off" | "false" | "no" | "0" => Some(AnalyticsMode::Off),
            "auto" => Some(AnalyticsMode::Auto),
            "on" | "true" | "yes" | "1" => Some(AnalyticsMode::On),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AnalyticsMode::Off => "off",
            AnalyticsMode::Auto => "auto",
            AnalyticsMode::On => "on",
        }
    }
}

/// pgtier.statement_mem's default, 1GB (as in `default_settings`).
const STATEMENT_MEM_DEFAULT_KB: u32 = 1 << 20;

#[derive(Debug, Clone)]
struct BlockUndo {
    key: String,
    before: String,
    local: bool,
    session_value: Option<String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            values: Arc::new(default_settings()),
            defaults: Arc::default(),
            statement_timeout_ms: 0,
            idle_in_transaction_timeout_ms: 0,
            statement_mem_kb: STATEMENT_MEM_DEFAULT_KB,
            analytics: AnalyticsMode::Auto,
            block_undo: Vec::new(),
            in_block: false,
            datetime: None,
            search_path: Arc::from(default_settings().remove("search_path").unwrap_or_default().as_str()),
            auth: SessionAuth::default(),
        }
    }
}

impl std::ops::Deref for Settings {
    type Target = HashMap<String, String>;
    fn deref(&self) -> &HashMap<String, String> {
        &self.values
    }
}

impl Settings {
    /// Inside a transaction block (SET LOCAL has an effect).
    pub(crate) fn in_block(&self) -> bool {
        self.in_block
    }

    pub(crate) fn auth(&self) -> &SessionAuth {
        &self.auth
    }

    pub(crate) fn auth_mut(&mut self) -> &mut SessionAuth {
        &mut self.auth
    }

    /// Sets `key` to an already normalized `value` for the session (inside
    /// a block: undone if the block rolls back, as PostgreSQL does).
    pub(crate) fn set(&mut self, key: &str, value: String) {
        self.set_scoped(key, value, false);
    }

    /// SET LOCAL (`local`): the value lasts until the block ends. The
    /// caller checks that a block is open (outside one PostgreSQL warns and
    /// changes nothing).
    pub(crate) fn set_scoped(&mut self, key: &str, value: String, local: bool) {
        if self.in_block {
            let i = match self.block_undo.iter().position(|u| u.key == key) {
                Some(i) => i,
                None => {
                    let before = self.values.get(key).cloned().unwrap_or_default();
                    self.block_undo.push(BlockUndo { key: key.to_owned(), before, local: false, session_value: None });
                    self.block_undo.len() - 1
                }
            };
            let undo = &mut self.block_undo[i];
            if local {
                undo.local = true;
            } else {
                undo.session_value = Some(value.clone());
            }
        }
        self.store(key, value);
    }

    fn store(&mut self, key: &str, value: String) {
        match key {
            "statement_timeout" => self.statement_timeout_ms = parse_ms(key, &value).unwrap_or(0),
            "idle_in_transaction_session_timeout" => {
                self.idle_in_transaction_timeout_ms = parse_ms(key, &value).unwrap_or(0)
            }
            "pgtier.statement_mem" => self.statement_mem_kb = parse_kb(key, &value).unwrap_or(STATEMENT_MEM_DEFAULT_KB),
            "pgtier.analytics" => self.analytics = AnalyticsMode::parse(&value).unwrap_or(AnalyticsMode::Auto),
            "search_path" if *self.search_path != *value => self.search_path = Arc::from(value.as_str()),
            "role" | "session_authorization" => self.auth.unchecked_at = None,
            _ => {}
        }
        let datetime =
            matches!(key, "timezone" | "datestyle" | "extra_float_digits" | "bytea_output" | "intervalstyle");
        Arc::make_mut(&mut self.values).insert(key.to_owned(), value);
        if datetime {
            let text = |k: &str| self.values.get(k).map_or("", String::as_str);
            self.datetime = crate::tz::context(
                text("timezone"),
                text("datestyle"),
                text("extra_float_digits"),
                text("bytea_output"),
                text("intervalstyle"),
            );
            crate::tz::install(self.datetime.as_ref());
        }
    }

    /// A transaction block starts: later changes are remembered until it ends.
    pub(crate) fn begin_block(&mut self) {
        self.in_block = true;
    }

    /// The block ends: a rollback restores every value it changed; a commit
    /// keeps session-level SETs and ends SET LOCALs (the value reverts to
    /// the block's last plain SET of it, or to the value before the block).
    pub(crate) fn end_block(&mut self, committed: bool) {
        self.in_block = false;
        for u in std::mem::take(&mut self.block_undo) {
            let value = match (committed, u.local) {
                (true, false) => continue,
                (true, true) => u.session_value.unwrap_or(u.before),
                (false, _) => u.before,
            };
            self.store(&u.key, value);
        }
    }

    /// The server configuration's default for `key` (normalized): the
    /// session starts with it and `SET key TO DEFAULT` returns to it.
    pub(crate) fn set_default(&mut self, key: &str, value: String) {
        Arc::make_mut(&mut self.defaults).insert(key.to_owned(), value.clone());
        self.store(key, value);
    }

    /// What `SET key TO DEFAULT` sets.
    pub(crate) fn default_of(&self, key: &str) -> String {
        match self.defaults.get(key) {
            Some(v) => v.clone(),
            None => default_settings().remove(key).unwrap_or_default(),
        }
    }

    /// search_path's value, as plans record it.
    #[inline]
    pub(crate) fn search_path_raw(&self) -> &Arc<str> {
        &self.search_path
    }

    /// The session's TimeZone and DateStyle for the date/time code: made
    /// this thread's by `tz::install` before the session runs anything.
    #[inline]
    pub(crate) fn datetime(&self) -> Option<&Arc<crate::tz::DtCtx>> {
        self.datetime.as_ref()
    }

    /// statement_timeout; None when 0 (off).
    #[inline]
    pub(crate) fn statement_timeout(&self) -> Option<std::time::Duration> {
        (self.statement_timeout_ms != 0).then(|| std::time::Duration::from_millis(u64::from(self.statement_timeout_ms)))
    }

    pub(crate) fn analytics(&self) -> AnalyticsMode {
        self.analytics
    }

    /// pgtier.statement_mem in bytes; usize::MAX when 0 (no bound).
    #[inline]
    pub(crate) fn statement_mem_bytes(&self) -> usize {
        match self.statement_mem_kb {
            0 => usize::MAX,
            kb => (kb as usize).saturating_mul(1024),
        }
    }

    /// idle_in_transaction_session_timeout; None when 0 (off).
    pub(crate) fn idle_in_transaction_timeout(&self) -> Option<std::time::Duration> {
        (self.idle_in_transaction_timeout_ms != 0)
            .then(|| std::time::Duration::from_millis(u64::from(self.idle_in_transaction_timeout_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_settings_read_and_print_as_postgresql() {
        let cases = [
            ("5000", "5s"),
            ("1min", "1min"),
            ("1.5s", "1500ms"),
            ("100", "100ms"),
            ("3600000", "1h"),
            ("1000us", "1ms"),
            ("0.5ms", "0"),
            ("100 ms", "100ms"),
            ("0", "0"),
            ("86400000", "1d"),
        ];
        for (input, shown) in cases {
            assert_eq!(format_ms(parse_ms("statement_timeout", input).unwrap()), shown, "{input}");
        }
        for bad in ["abc", "5 fortnights", "-1", "3000000000", ""] {
            let e = parse_ms("statement_timeout", bad).unwrap_err();
            assert_eq!(e.sqlstate, "22023", "{bad}");
        }
        assert_eq!(
            parse_ms("statement_timeout", "-1").unwrap_err().message,
            "-1 ms is outside the valid range for parameter \"statement_timeout\" (0 .. 2147483647)"
        );
    }

    #[test]
    fn memory_settings_read_and_print_as_postgresql() {
        let cases =
            [("1GB", "1GB"), ("1024", "1MB"), ("64kB", "64kB"), ("1536MB", "1536MB"), ("2048B", "2kB"), ("0", "0")];
        for (input, shown) in cases {
            assert_eq!(format_kb(parse_kb("pgtier.statement_mem", input).unwrap()), shown, "{input}");
        }
        for bad in ["lots", "1 GiB", "-1", "1gb"] {
            assert_eq!(parse_kb("pgtier.statement_mem", bad).unwrap_err().sqlstate, "22023", "{bad}");
        }
        assert_eq!(format_kb(STATEMENT_MEM_DEFAULT_KB), default_settings()["pgtier.statement_mem"]);
    }

    #[test]
    fn set_local_ends_with_the_block_and_rollback_undoes_set() {
        let mut s = Settings::default();
        s.set("statement_timeout", "1s".into());
        s.begin_block();
        s.set_scoped("statement_timeout", "50ms".into(), true);
        assert_eq!(s.statement_timeout(), Some(std::time::Duration::from_millis(50)));
        s.end_block(true);
        assert_eq!(s.get("statement_timeout").map(String::as_str), Some("1s"));
        assert_eq!(s.statement_timeout(), Some(std::time::Duration::from_secs(1)));
        s.begin_block();
        s.set("statement_timeout", "2s".into());
        s.end_block(false);
        assert_eq!(s.statement_timeout(), Some(std::time::Duration::from_secs(1)));
        s.begin_block();
        s.set_scoped("statement_timeout", "7ms".into(), true);
        s.set("statement_timeout", "0".into());
        s.end_block(true);
        assert_eq!(s.statement_timeout(), None);
    }
}
