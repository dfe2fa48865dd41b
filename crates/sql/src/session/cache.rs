//! Cache-group statements in a session (DESIGN.md §3): recognised in the
//! text before sqlparser sees it (sqlparser does not know them), run by the
//! attached [`Cache`], never inside a transaction block (25001, as
//! PostgreSQL answers VACUUM there). UNLOAD and REFRESH evaluate their WHERE
//! on the cache with the session's own SQL, so the predicate means what a
//! SELECT on the root table would.
//!
//! Cost when no cache statement is involved: a look at the text's first
//! word on the uncached prepare path only; nothing on the cached paths.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use pgtier_cache::{Cache, CacheError, CacheStatement, Cancel, Claim, LoadOptions, parse_cache_statement};
use pgtier_engine::Value;

use super::rows::Tag;
use super::statement::{Stmt, StmtKind, TxnKind};
use super::{Block, Connection, ExecResult};
use crate::catalog::quote_ident;
use crate::error::{Result, SqlError, SqlNotice};

impl From<CacheError> for SqlError {
    fn from(e: CacheError) -> SqlError {
        let sqlstate = cache_sqlstate(e.sqlstate());
        let hint = e.hint().or_else(|| match &e {
            // The message names the URL (never the password); the hint says where to fix it.
            CacheError::Connect(_) if sqlstate.starts_with("28") => {
                Some("Check [backend] password_file or password_env against the role in PostgreSQL.".to_owned())
            }
            CacheError::Connect(_) => {
                Some("Check that PostgreSQL is running and that [backend] url names it.".to_owned())
            }
            _ => None,
        });
        let mut out = match e {
            // The engine's error keeps its detail and constraint.
            CacheError::Engine(engine) => SqlError::from(engine),
            other => SqlError::new(sqlstate, other.to_string()),
        };
        if let Some(hint) = hint {
            out.hint = Some(hint);
        }
        out
    }
}

/// `SqlError` holds a `&'static str` SQLSTATE; the cache's come from a
/// borrowed `&str` (some are the backend's), so they are matched to the
/// static ones PostgreSQL defines that a cache statement can raise.
fn cache_sqlstate(code: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "0A000", "0AP01", "08000", "08001", "08003", "08004", "08006", "08P01", "2200H", "22003", "22007", "22008",
        "22012", "22023", "22P02", "23505", "25001", "28000", "28P01", "3D000", "40001", "40P01", "42501", "42601",
        "42702", "42703", "42704", "42712", "42804", "42809", "42830", "42883", "42P01", "42P07", "42P16", "42P17",
        "53000", "53100", "53200", "53300", "54000", "55000", "55006", "57014", "57P01", "57P02", "57P03", "58000",
        "58030", "XX000", "XX001",
    ];
    KNOWN.iter().copied().find(|k| *k == code).unwrap_or(if code.starts_with("08") { "08000" } else { "XX000" })
}

/// Whether `sql`'s first word (after whitespace and comments) may start a
/// cache-group statement: the cheap test before the full one.
fn may_start_cache_statement(sql: &str) -> bool {
    let mut rest = sql;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("--") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if rest.starts_with("/*") {
            // Nested comments are rare here; the full parser handles them.
            let Some(end) = rest.find("*/") else { return false };
            rest = &rest[end + 2..];
        } else {
            break;
        }
    }
    let end = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
    let word = &rest[..end];
    word.eq_ignore_ascii_case("create") || pgtier_cache::CACHE_VERBS.iter().any(|v| word.eq_ignore_ascii_case(v))
}

/// LOAD/REFRESH options; PARALLEL not given: 0, the cache's `load_parallel`.
fn load_options(predicate: Option<String>, parallel: Option<usize>) -> LoadOptions {
    LoadOptions { predicate, parallel: parallel.unwrap_or(0), ..LoadOptions::default() }
}

/// 25001, as PostgreSQL refuses VACUUM inside a block.
fn in_block_error(statement: &CacheStatement) -> SqlError {
    SqlError::new("25001", format!("{} cannot run inside a transaction block", statement.command()))
}

/// The cache statement `sql` is, if any. `anywhere`: also look past the
/// first statement of several (after sqlparser refused the text), where a
/// cache statement is an error: it must be alone in its Query message.
pub(super) fn cache_statement_in(sql: &str, anywhere: bool) -> Result<Option<CacheStatement>> {
    if !anywhere && !may_start_cache_statement(sql) {
        return Ok(None);
    }
    let pieces = CacheStatement::split_statements(sql);
    if pieces.len() <= 1 {
        return parse_cache_statement(sql).transpose().map_err(SqlError::from);
    }
    for piece in pieces {
        if let Some(parsed) = parse_cache_statement(piece) {
            let statement = parsed?;
            return Err(in_block_error(&statement));
        }
    }
    Ok(None)
}

impl Connection {
    /// Attaches the cache whose groups this session's cache-group
    /// statements manage and whose state the pgtier_cache_* views show.
    /// Without one those statements fail with 08001 and the views are empty.
    pub fn attach_cache(&mut self, cache: Arc<Cache>) {
        self.cache = Some(cache);
    }

    /// The attached cache, if any.
    pub fn cache(&self) -> Option<&Arc<Cache>> {
        self.cache.as_ref()
    }

    /// The statement for `sql` when it is a cache-group statement (to run
    /// with [`Connection::execute_cache`]); None for any other text.
    /// Several statements of which one is a cache statement: 25001.
    pub fn cache_stmt(&mut self, sql: &str) -> Result<Option<Arc<Stmt>>> {
        match cache_statement_in(sql, false) {
            Ok(Some(statement)) => {
                Ok(Some(Arc::new(Stmt::new(StmtKind::Cache(Box::new(statement)), Vec::new(), TxnKind::None, false))))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.fail();
                Err(e)
            }
        }
    }

    /// Cache-group statements change what every session reads and what
    /// reaches PostgreSQL: a superuser or a member of pg_cache_admin
    /// only (42501).
    fn require_cache_admin(&mut self) -> Result<()> {
        use crate::catalog::roles::{CACHE_ADMIN_ROLE, current_role, session_doc, superuser};
        let catalog = self.db.catalog();
        let Some(doc) = session_doc(self.settings.auth_mut(), &catalog)? else { return Ok(()) };
        let role = current_role(&self.settings).to_owned();
        if superuser(self.settings.auth(), Some(&doc), &role) || doc.closure(&role, true).contains(CACHE_ADMIN_ROLE) {
            return Ok(());
        }
        Err(SqlError::new(
            "42501",
            format!(
                "permission denied to run cache-group statements: role \"{role}\" is neither a superuser nor a member of {CACHE_ADMIN_ROLE}"
            ),
        ))
    }

    /// Runs a cache-group statement: outside a transaction block only; the
    /// command tag counts instances (LOAD, UNLOAD, REFRESH), and LOAD and
    /// REFRESH add a NOTICE with rows per table, seconds and rows/s.
    pub fn execute_cache(&mut self, statement: &CacheStatement) -> Result<ExecResult> {
        let result = self.execute_cache_inner(statement);
        if result.is_err() {
            self.fail();
        }
        result
    }

    fn execute_cache_inner(&mut self, statement: &CacheStatement) -> Result<ExecResult> {
        match self.block {
            Block::None => {}
            Block::Failed => return Err(SqlError::transaction_aborted()),
            Block::Active => return Err(in_block_error(statement)),
        }
        self.require_cache_admin()?;
        let cache = self.cache.clone().ok_or(CacheError::NoBackend)?;
        let (tag, n) = match statement {
            CacheStatement::AcceptDefinition { name } => {
                let moved = cache.accept_definition(name)?;
                let message = if moved.is_empty() {
                    format!(
                        "cache group \"{name}\": PostgreSQL's definitions of its tables are the accepted ones already"
                    )
                } else {
                    format!(
                        "cache group \"{name}\": accepted PostgreSQL's current definition of {}; held write-through resumes within seconds",
                        moved.join(", ")
                    )
                };
                self.notices.push(SqlNotice { sqlstate: "00000", message });
                (Tag::Plain("ALTER CACHE GROUP"), 0)
            }
            CacheStatement::Partition(map) => self.declare_partitions(&cache, map)?,
            CacheStatement::Tier(command) => {
                let message = cache.tier_command(*command)?;
                self.notices.push(SqlNotice { sqlstate: "00000", message });
                (Tag::Plain("ALTER CACHE TIER"), 0)
            }
            CacheStatement::Takeover => {
                let message = match cache.takeover()? {
                    Claim::TakenOver { previous } if previous.is_empty() => {
                        "took the node name over from a data directory from before incarnation ids; write-through starts within seconds".to_owned()
                    }
                    Claim::TakenOver { previous } => {
                        format!("took the node name over from data directory {previous}; its rows stay in pgtier.awt_progress; write-through starts within seconds")
                    }
                    Claim::Owned | Claim::Adopted => "the node name is this data directory's already".to_owned(),
                };
                let node = cache.identity();
                self.notices.push(SqlNotice {
                    sqlstate: "00000",
                    message: format!("pgtier node \"{}\" (incarnation {}): {message}", node.name, node.incarnation),
                });
                (Tag::Plain("TAKEOVER CACHE NODE"), 0)
            }
            CacheStatement::Create(def) => {
                cache.create_group(def)?;
                (Tag::Plain("CREATE CACHE GROUP"), 0)
            }
            CacheStatement::Drop { name, if_exists } => {
                if *if_exists && !cache.groups().iter().any(|g| g.name == *name) {
                    self.notices.push(SqlNotice {
                        sqlstate: "00000",
                        message: format!("cache group \"{name}\" does not exist, skipping"),
                    });
                } else {
                    cache.drop_group(name, *if_exists)?;
                }
                (Tag::Plain("DROP CACHE GROUP"), 0)
            }
            CacheStatement::Load { name, predicate, parallel } => {
                let options = load_options(predicate.clone(), *parallel);
                let report = self.watch_cancel(&options.cancel, || cache.load(name, &options))?;
                let rows: u64 = report.rows.iter().map(|(_, n)| n).sum();
                let per_table = report.rows.iter().map(|(t, n)| format!("{t} {n}")).collect::<Vec<_>>().join(", ");
                self.notice_speed(
                    format!("loaded {} instances ({per_table} rows)", report.instances),
                    rows,
                    report.seconds,
                );
                (Tag::Counted("LOAD CACHE GROUP"), report.instances)
            }
            CacheStatement::Unload { name, predicate } => {
                let keys = match predicate {
                    Some(p) => Some(self.cached_root_keys(&cache, name, p)?),
                    None => None,
                };
                let report = cache.unload(name, keys.as_deref())?;
                if report.skipped_dirty > 0 {
                    self.notices.push(SqlNotice {
                        sqlstate: "00000",
                        message: format!(
                            "{} instances with changes not yet propagated to PostgreSQL were kept",
                            report.skipped_dirty
                        ),
                    });
                }
                (Tag::Counted("UNLOAD CACHE GROUP"), report.instances)
            }
            CacheStatement::Refresh { name, predicate, parallel } => {
                let keys = self.cached_root_keys(&cache, name, predicate.as_deref().unwrap_or("true"))?;
                let options = load_options(predicate.clone(), *parallel);
                let report = self.watch_cancel(&options.cancel, || cache.refresh(name, &keys, &options))?;
                let summary = format!(
                    "refreshed {} instances ({} removed, {} kept with unpropagated changes)",
                    report.reloaded, report.removed, report.skipped_dirty
                );
                self.notice_speed(summary, options.progress.rows(), report.seconds);
                (Tag::Counted("REFRESH CACHE GROUP"), report.reloaded)
            }
            CacheStatement::Verify { name } => {
                let cancel = Cancel::new();
                let tally = self.watch_cancel(&cancel, || cache.verify_cancellable(name, &cancel))?;
                if !tally.is_clean() {
                    return Err(verify_failed(name, &tally));
                }
                self.notices.push(SqlNotice {
                    sqlstate: "00000",
                    message: format!(
                        "{} cached instances equal PostgreSQL's ({} instances of the group are not cached)",
                        tally.compared, tally.not_cached
                    ),
                });
                (Tag::Counted("VERIFY CACHE GROUP"), tally.compared)
            }
        };
        Ok(ExecResult { tag: tag.render(n), rows_affected: n, rows: None })
    }

    fn notice_speed(&mut self, what: String, rows: u64, seconds: f64) {
        let rate = if seconds > 0.0 { rows as f64 / seconds } else { 0.0 };
        self.notices
            .push(SqlNotice { sqlstate: "00000", message: format!("{what} in {seconds:.3} s, {rate:.0} rows/s") });
    }

    /// Runs `work` while a watcher thread trips `cancel` when the session's
    /// cancel flag goes up (a CancelRequest, Ctrl-C in psql): the load stops
    /// between instances and the statement fails with 57014.
    fn watch_cancel<R>(&self, cancel: &Cancel, work: impl FnOnce() -> std::result::Result<R, CacheError>) -> Result<R> {
        let Some(flag) = self.cancel.as_deref() else { return work().map_err(SqlError::from) };
        match cancel.when(|| flag.swap(false, Ordering::AcqRel), work) {
            // The load's own error after a cancel is the cancel's doing.
            (Err(_), true) => Err(SqlError::canceled()),
            (other, _) => other.map_err(SqlError::from),
        }
    }

    /// ALTER CACHE GROUP g PARTITION BY RANGE: the map into PostgreSQL.
    fn declare_partitions(&mut self, cache: &Cache, map: &pgtier_cache::ShardMap) -> Result<(Tag, u64)> {
        cache.declare_partitions(map)?;
        let message = format!(
            "cache group \"{}\": node partitions written to pgtier.node_partitions ({} nodes); each node reads them when it creates the group",
            map.group,
            map.shards.len()
        );
        self.notices.push(SqlNotice { sqlstate: "00000", message });
        Ok((Tag::Plain("ALTER CACHE GROUP"), 0))
    }

    /// The root keys of group `name`'s cached instances whose root row
    /// matches `predicate`, evaluated by this session on the cache.
    fn cached_root_keys(&mut self, cache: &Cache, name: &str, predicate: &str) -> Result<Vec<Vec<Value>>> {
        let root = cache.root_key(name)?;
        let columns = root.key_columns.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
        let sql = format!("SELECT {columns} FROM {} WHERE {predicate}", quote_ident(&root.table));
        // This node's own instances are what is meant, also of a group
        // partitioned over nodes (whose scans applications may not make).
        let result = pgtier_cache::with_own_scans(|| self.execute_sql(&sql))?;
        Ok(result.rows.map(|rows| rows.iter().map(|row| row.values().to_vec()).collect()).unwrap_or_default())
    }
}

/// A cache that differs from PostgreSQL: XX001 (data_corrupted), with the
/// first differences in DETAIL.
fn verify_failed(group: &str, tally: &pgtier_cache::VerifyTally) -> SqlError {
    let mut error = SqlError::new(
        "XX001",
        format!(
            "cache group \"{group}\" differs from PostgreSQL: {} of {} cached instances differ, {} are cached but not in PostgreSQL",
            tally.differing,
            tally.compared,
            tally.only_in_cache.len()
        ),
    );
    let mut lines: Vec<String> =
        tally.differences.iter().take(20).map(|(key, table, what)| format!("{table} {key}: {what}")).collect();
    lines.extend(tally.only_in_cache.iter().take(20).map(|key| format!("only in the cache: {key}")));
    error.detail = Some(lines.join("\n"));
    error.hint = Some("Changes made in PostgreSQL behind the cache's back, refused write-through transactions (pgtier.awt_errors) or writes still propagating (run it when pgtier_cache_propagation shows no backlog). REFRESH CACHE GROUP reloads from PostgreSQL.".into());
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_five_verbs_are_looked_at() {
        for sql in ["LOAD CACHE GROUP g", "  -- c\n /* c */ create readonly", "refresh", "Drop x", "unload;"] {
            assert!(may_start_cache_statement(sql), "{sql}");
        }
        for sql in ["SELECT 1", "insert into t values (1)", "loader", "/* create */ select", ""] {
            assert!(!may_start_cache_statement(sql), "{sql}");
        }
    }

    #[test]
    fn a_cache_statement_among_others_is_25001() {
        let e = cache_statement_in("SELECT 1; LOAD CACHE GROUP g", true).unwrap_err();
        assert_eq!(
            (e.sqlstate, e.message.as_str()),
            ("25001", "LOAD CACHE GROUP cannot run inside a transaction block")
        );
        assert!(cache_statement_in("SELECT 1; SELECT 2", true).unwrap().is_none());
        assert!(cache_statement_in("SELECT 1", false).unwrap().is_none());
        assert!(matches!(cache_statement_in("LOAD CACHE GROUP g;", false), Ok(Some(CacheStatement::Load { .. }))));
        assert_eq!(cache_statement_in("LOAD CACHE GROUP", false).unwrap_err().sqlstate, "42601");
    }

    #[test]
    fn cache_errors_keep_sqlstate_and_hint() {
        let e = SqlError::from(CacheError::NoBackend);
        assert_eq!(e.sqlstate, "08001");
        assert!(e.hint.is_some());
        let e = SqlError::from(CacheError::PredicateNotOnRoot { table: "c".into() });
        assert_eq!(e.sqlstate, "42P17");
        assert!(e.hint.is_some());
    }
}
