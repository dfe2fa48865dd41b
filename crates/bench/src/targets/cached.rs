//! The embedded engine with TATP as a cache group over PostgreSQL (DESIGN.md
//! §3): a [`Cache`] over a database opened like [`EmbeddedTarget::open`]
//! opens one, driven in direct mode by the same [`EmbeddedTarget`], so a run
//! over cached data and a run over locally populated data differ only in
//! where the rows came from. Dynamic groups load missing instances inside
//! the workload's own statements (the cache's miss hook on the database).
//!
//! Also the "exactly PostgreSQL's rows" check at scale: a per-table
//! checksum computed the same way from the engine's rows and from
//! PostgreSQL's COPY text output.

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use pgtier_backend::BackendConfig;
use pgtier_cache::{Aging, Cache, CacheConfig, CacheError, CreateGroup, GroupKind};
use pgtier_engine::{CommitMode, Database, Value as EValue};

use super::embedded::{EmbeddedTarget, engine_config};
use super::postgres::db_error;
use crate::target::DbError;
use crate::tatp::schema::TABLES;

fn cache_error(e: &CacheError) -> DbError {
    DbError::new(Some(e.sqlstate()), e.to_string())
}

/// The TATP cache group: subscriber and its three descendant tables.
/// AWT so the standard mix may write to it (write-through carries the
/// writes to PostgreSQL).
pub fn tatp_group(name: &str, dynamic: bool, aging: Aging) -> CreateGroup {
    CreateGroup {
        name: name.to_owned(),
        kind: GroupKind::Awt,
        dynamic,
        root: TABLES[0].to_owned(),
        root_predicate: None,
        children: TABLES[1..].iter().map(|t| (*t).to_owned()).collect(),
        aging,
        keep: false,
        memory_budget: None,
        autorefresh: false,
        flash: pgtier_cache::FlashPolicy::Default,
    }
}

/// Opens (creating) the database in `dir` with the embedded target's
/// settings, a [`Cache`] over it whose backend is PostgreSQL at `url`, and
/// the target that drives it.
pub fn open_cache(
    dir: &Path,
    mode: CommitMode,
    url: &str,
    config: CacheConfig,
) -> Result<(Arc<Cache>, EmbeddedTarget), DbError> {
    std::fs::create_dir_all(dir).map_err(|e| DbError::new(None, format!("creating {}: {e}", dir.display())))?;
    let db = Database::open(dir, engine_config(mode)).map_err(|e| DbError::new(Some(e.sqlstate()), e.to_string()))?;
    let params = BackendConfig { url: Some(url.to_owned()), ..BackendConfig::default() }
        .resolve()
        .map_err(|e| DbError::new(Some("08001"), e.to_string()))?;
    let cache = Cache::open(db.clone(), Some(params), config).map_err(|e| cache_error(&e))?;
    Ok((cache, EmbeddedTarget::from_database(db, dir, mode)))
}

/// Runs a cache call, mapping its error for the bench's callers.
pub fn cache_call<T>(result: Result<T, CacheError>) -> Result<T, DbError> {
    result.map_err(|e| cache_error(&e))
}

/// LOAD, once write-through reads: a new node's may take a moment to
/// start, and LOAD waits for it (55000 until then).
pub fn load_when_ready(cache: &Cache, group: &str, options: &pgtier_cache::LoadOptions) -> Result<(), DbError> {
    for attempt in 1.. {
        match cache.load(group, options) {
            Err(error) if error.sqlstate() == "55000" && attempt < 60 => {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            other => return cache_call(other).map(|_| ()),
        }
    }
    Ok(())
}

/// How long write-through took to send PostgreSQL everything committed so
/// far; None when it did not within `timeout`, or `stop` said so first
/// (asked every second: Ctrl-C).
pub fn write_through_drained(
    cache: &Cache,
    timeout: std::time::Duration,
    stop: &dyn Fn() -> bool,
) -> Option<std::time::Duration> {
    let started = std::time::Instant::now();
    loop {
        if cache.wait_propagated(std::time::Duration::from_secs(1)) {
            return Some(started.elapsed());
        }
        if stop() || started.elapsed() >= timeout {
            return None;
        }
    }
}

/// A side's rate with write-through caught up: the measure's transactions
/// (`rate` over `window`) over the window plus the `drain` after it. A side
/// whose writes outrun what PostgreSQL applies grows a backlog it cannot
/// keep growing (its instances with changes PostgreSQL does not have stay
/// in memory past the budget): it sustains at most this. The drain runs
/// with the clients stopped, so faster than under load: still an upper
/// bound.
pub fn caught_up_rate(rate: f64, window: std::time::Duration, drain: std::time::Duration) -> f64 {
    let window = window.as_secs_f64();
    rate * window / (window + drain.as_secs_f64()).max(f64::MIN_POSITIVE)
}

/// Drops the replication origins write-through made for `node`
/// (PostgreSQL keeps at most `max_replication_slots` of them, and they stay
/// when a node is gone), waiting while its sessions still hold them.
pub fn drop_node_origins(url: &str, node: &str) -> Result<(), DbError> {
    let mut client = pgtier_backend::connect::connect(url).map_err(|e| DbError::new(None, e.to_string()))?;
    let sql = format!(
        "SELECT pg_replication_origin_drop(roname) FROM pg_replication_origin WHERE roname LIKE 'pgtier\\_{node}\\_%'"
    );
    for _ in 0..200 {
        match client.batch_execute(&sql) {
            Ok(()) => return Ok(()),
            Err(error) if error.code() == Some(&postgres::error::SqlState::OBJECT_IN_USE) => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(error) => return Err(db_error(&error)),
        }
    }
    Err(DbError::new(Some("55006"), format!("the replication origins of node {node} stay in use")))
}

/// A multiset digest of a table: its row count and the wrapping sum of a
/// hash of each row's COPY text line, so row order does not matter and any
/// changed, missing or extra row shows (up to hash collisions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableChecksum {
    pub rows: u64,
    pub hash_sum: u64,
}

impl TableChecksum {
    fn add(&mut self, line: &[u8]) {
        self.rows += 1;
        self.hash_sum = self.hash_sum.wrapping_add(line_hash(line));
    }
}

/// FNV-1a with a final avalanche (splitmix64), stable across processes and
/// Rust versions, unlike std's hasher.
fn line_hash(line: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in line {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Appends `text` escaped as COPY's text format does.
fn push_copy_escaped(line: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => line.push_str("\\\\"),
            '\t' => line.push_str("\\t"),
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            '\u{8}' => line.push_str("\\b"),
            '\u{c}' => line.push_str("\\f"),
            '\u{b}' => line.push_str("\\v"),
            other => line.push(other),
        }
    }
}

/// [`TableChecksum`] of `table` in the engine: each row formatted as
/// PostgreSQL's `COPY table TO STDOUT` prints it (tab-separated text
/// output, `\N` for NULL), columns in table order (a cache group's tables
/// have PostgreSQL's column order).
pub fn engine_checksum(db: &Database, table: &str) -> Result<TableChecksum, DbError> {
    let engine = |e: pgtier_engine::EngineError| DbError::new(Some(e.sqlstate()), e.to_string());
    let id = db
        .catalog()
        .table_by_name(table)
        .ok_or_else(|| DbError::new(Some("42P01"), format!("relation \"{table}\" does not exist")))?
        .id;
    let mut sum = TableChecksum::default();
    let (mut line, mut text) = (String::new(), String::new());
    let mut txn = db.begin().map_err(engine)?;
    txn.scan_table(id, |row| {
        line.clear();
        for (i, value) in row.values().iter().enumerate() {
            if i > 0 {
                line.push('\t');
            }
            if matches!(value, EValue::Null) {
                line.push_str("\\N");
            } else {
                text.clear();
                pgtier_sql::value::write_text(value, &mut text);
                push_copy_escaped(&mut line, &text);
            }
        }
        sum.add(line.as_bytes());
        Ok(true)
    })
    .map_err(engine)?;
    txn.commit().map_err(engine)?;
    Ok(sum)
}

/// [`TableChecksum`] of `source` in PostgreSQL, from `COPY source TO
/// STDOUT`: a table, or a parenthesized query over one (`(SELECT * FROM t
/// WHERE ...)`) to digest some of its rows.
pub fn postgres_checksum(client: &mut postgres::Client, source: &str) -> Result<TableChecksum, DbError> {
    let table = source;
    let mut reader = client.copy_out(&format!("COPY {source} TO STDOUT")).map_err(|e| db_error(&e))?;
    let mut sum = TableChecksum::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| DbError::new(Some("08006"), format!("reading COPY of {table}: {e}")))?;
        if n == 0 {
            return Ok(sum);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        sum.add(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_ignores_order_and_sees_changes() {
        let mut a = TableChecksum::default();
        let mut b = TableChecksum::default();
        for line in ["1\tx", "2\ty"] {
            a.add(line.as_bytes());
        }
        for line in ["2\ty", "1\tx"] {
            b.add(line.as_bytes());
        }
        assert_eq!(a, b);
        b.add(b"3\tz");
        assert_ne!(a, b);
        let mut c = TableChecksum::default();
        c.add(b"1\tx");
        c.add(b"2\tz");
        assert_ne!(a, c);
    }

    #[test]
    fn escapes_like_copy_text() {
        let mut line = String::new();
        push_copy_escaped(&mut line, "a\\b\tc\nd");
        assert_eq!(line, "a\\\\b\\tc\\nd");
    }
}
