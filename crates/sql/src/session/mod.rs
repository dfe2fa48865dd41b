//! A session: [`Connection`], the embedded (direct mode) API and what the
//! wire-protocol server runs each client's statements through. One
//! connection per thread at a time; many connections share one engine
//! [`Database`] (a cheap clone of an `Arc`).
//!
//! A connection owns all transaction-block and statement state, as a
//! PostgreSQL backend does: blocks, explicit and implicit, and the aborted
//! state (`session/block.rs`), named and cached statements and SQL-level
//! PREPARE/EXECUTE/DEALLOCATE (`session/prepared.rs`), settings (SET/SHOW).
//! Its server keeps protocol state only.
//!
//! Transaction state follows PostgreSQL: outside BEGIN each statement is its
//! own transaction (autocommit); inside BEGIN an error aborts the block and
//! every later statement fails with 25P02 until COMMIT (answered ROLLBACK)
//! or ROLLBACK.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use pgtier_engine::{CommitMode, Database, RowBuf, Transaction, Value};
use sqlparser::ast::Statement;

use crate::bind::bind_statement;
use crate::error::{Result, SqlError, SqlNotice};
use crate::exec::{Exec, Interrupt, LevelHashes, ResultBuf};
use crate::plan::{OutputColumn, Plan, Prepared};
use crate::settings::{READ_ONLY_SETTINGS, SUPERUSER_SETTINGS, Settings, normalize_setting};
use crate::value;

mod analytics;
mod backward;
mod block;
mod cache;
mod cursor;
mod prepared;
mod rows;
mod savepoint;
mod statement;
mod temp;

pub use analytics::{analytics_config, analytics_executor_threads, set_analytics_config, stop_analytics};
pub use block::{CommitParticipant, TransactionStatus, Via};
pub use prepared::{Fallback, Utility};
use rows::Tag;
pub use rows::{CommandTag, ExecResult, ResultRows, Row, Rows};
pub use statement::{PreparedStatement, ResultColumns, Stmt, StmtKind};

pub type Column = OutputColumn;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    /// No BEGIN: each statement commits on its own.
    None,
    Active,
    /// An error inside BEGIN: only COMMIT/ROLLBACK are accepted.
    Failed,
}

pub struct Connection {
    db: Database,
    txn: Option<Transaction>,
    block: Block,
    txn_start_micros: i64,
    /// The start of the transaction a statement bound outside one will run
    /// in, fixed when its date/time input read the clock (`'now'`); taken
    /// by [`Connection::ensure_txn`], dropped at the end of the message run
    /// or when the statement fails.
    pending_txn_start: Option<i64>,
    settings: Settings,
    params: Vec<Value>,
    rowbuf: RowBuf,
    keybuf: Vec<Value>,
    scratch: Vec<Value>,
    dml_keys: Vec<Value>,
    dml_row: Vec<Value>,
    row_pool: Vec<Vec<Value>>,
    result: ResultBuf,
    /// The statement whose rows `result` holds (0: none).
    result_owner: u64,
    /// Result buffers of recently run statements (see `use_result_of`).
    parked_results: Vec<(u64, ResultBuf)>,
    notices: Vec<SqlNotice>,
    /// Raised by another thread to cancel the running statement (57014).
    cancel: Option<Arc<AtomicBool>>,
    sequences: crate::exec::SessionSequences,
    /// Named statements: Parse with a name and SQL PREPARE (one namespace).
    named: HashMap<String, Arc<Stmt>>,
    /// Statements by SQL text (session/prepared.rs).
    by_text: HashMap<String, Arc<Stmt>>,
    /// Where statements the binder refuses may run instead.
    fallback: Option<Box<dyn Fallback>>,
    /// The open block is one the connection opened for a message run
    /// (session/block.rs).
    implicit: bool,
    participants: Vec<Box<dyn CommitParticipant>>,
    /// WARNINGs for transaction statements, for the server to send.
    warnings: Vec<SqlNotice>,
    /// Cache groups: their statements and the pgtier_cache_* views (session/cache.rs).
    cache: Option<Arc<pgtier_cache::Cache>>,
    /// The block's savepoints, outermost first (session/savepoint.rs).
    savepoints: Vec<savepoint::Named>,
    /// Temporary tables: the session's schema and ON COMMIT actions (session/temp.rs).
    temp: temp::Temp,
    /// Open SQL cursors (session/cursor.rs).
    cursors: cursor::Cursors,
    /// The database's columnar copies, if they run, and the registry's
    /// generation they were looked up at (session/analytics.rs).
    analytics: Option<Arc<crate::catalog::analytics::Analytics>>,
    analytics_seen: u64,
}

/// Statements whose result buffers a connection keeps.
const PARKED_RESULTS_MAX: usize = 8;
/// A buffer of more values than this is dropped rather than kept.
const PARKED_VALUES_MAX: usize = 256;

fn parse_one(sql: &str) -> Result<Option<Statement>> {
    let mut stmts = crate::parse::parse_sql(sql).map_err(|e| prepared::parse_failure(sql, e))?;
    match stmts.len() {
        0 => Ok(None),
        1 => Ok(stmts.pop()),
        _ => Err(SqlError::syntax("cannot insert multiple commands into a prepared statement")),
    }
}

impl Connection {
    pub fn new(db: Database) -> Connection {
        Connection {
            db,
            txn: None,
            savepoints: Vec::new(),
            block: Block::None,
            txn_start_micros: 0,
            pending_txn_start: None,
            settings: Settings::default(),
            params: Vec::new(),
            rowbuf: RowBuf::new(),
            keybuf: Vec::new(),
            scratch: Vec::new(),
            dml_keys: Vec::new(),
            dml_row: Vec::new(),
            row_pool: Vec::new(),
            result: ResultBuf::default(),
            result_owner: 0,
            parked_results: Vec::new(),
            notices: Vec::new(),
            cancel: None,
            sequences: Default::default(),
            named: HashMap::new(),
            by_text: HashMap::new(),
            fallback: None,
            implicit: false,
            participants: Vec::new(),
            warnings: Vec::new(),
            cache: None,
            temp: temp::Temp::new(),
            cursors: cursor::Cursors::default(),
            analytics: None,
            analytics_seen: 0,
        }
        .with_temp_schema()
        .with_analytics()
        .with_commit_mode_setting()
    }

    /// `synchronous_commit` starts as the database's commit mode says.
    fn with_commit_mode_setting(mut self) -> Connection {
        let default = self.default_synchronous_commit();
        self.settings.set("synchronous_commit", default.into());
        self
    }

    fn default_synchronous_commit(&self) -> &'static str {
        if self.db.default_commit_mode() == CommitMode::Async { "off" } else { "on" }
    }

    /// A flag another thread raises to cancel the statement this session is
    /// running: it stops within about a thousand rows with 57014, as
    /// PostgreSQL answers a CancelRequest. The statement lowers the flag.
    pub fn set_cancel_flag(&mut self, flag: Arc<AtomicBool>) {
        if let Some(t) = self.txn.as_mut() {
            t.set_cancel_flag(Arc::clone(&flag));
        }
        self.cancel = Some(flag);
    }

    /// A setting's default for this session, as the server's configuration
    /// gives it (statement_timeout, idle_in_transaction_session_timeout,
    /// ...): the session starts with it and `SET name TO DEFAULT` returns
    /// to it. Errors as `SET` would (42704, 22023, 55P02).
    pub fn set_setting_default(&mut self, name: &str, value: &str) -> Result<()> {
        let key = name.to_lowercase();
        if !self.settings.contains_key(&key) {
            return Err(SqlError::new("42704", format!("unrecognized configuration parameter \"{name}\"")));
        }
        if READ_ONLY_SETTINGS.contains(&key.as_str()) {
            return Err(SqlError::new("55P02", format!("parameter \"{key}\" cannot be changed")));
        }
        let v = normalize_setting(&key, value)?;
        self.settings.set_default(&key, v);
        Ok(())
    }

    /// idle_in_transaction_session_timeout, for the server: a session idle
    /// inside a transaction block longer than this is ended (25P03).
    pub fn idle_in_transaction_timeout(&self) -> Option<std::time::Duration> {
        self.settings.idle_in_transaction_timeout()
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Makes this session's TimeZone and DateStyle the ones the date/time
    /// code of this thread reads (tz.rs): the server calls it before it
    /// reads a session's messages (parameters and COPY data are parsed,
    /// result rows formatted, outside any statement).
    #[inline]
    pub fn enter(&self) {
        crate::tz::install(self.settings.datetime());
    }

    /// Parses and plans `sql` (one statement, `$1..$n` parameters).
    pub fn prepare(&mut self, sql: &str) -> Result<PreparedStatement> {
        if self.block == Block::Failed {
            return Err(SqlError::transaction_aborted());
        }
        let result = self.prepare_inner(sql);
        if result.is_err() {
            self.fail();
        }
        result
    }

    fn prepare_inner(&mut self, sql: &str) -> Result<PreparedStatement> {
        if let Some(statement) = cache::cache_statement_in(sql, false)? {
            return Err(SqlError::unsupported(format!("preparing {}", statement.command()))
                .with_hint("Run cache-group statements with Connection::execute_sql."));
        }
        let ast = parse_one(sql)?;
        let prepared = match &ast {
            Some(stmt) => self.bind(stmt)?,
            None => Prepared {
                plan: Plan::Noop { tag: "" },
                modifying: Vec::new(),
                perms: Vec::new(),
                param_types: Vec::new(),
                deps: Vec::new(),
                indexes: Vec::new(),
                reads_clock: false,
                search_path: None,
                names_stamp: 0,
            },
        };
        // An embedded prepare is PostgreSQL's Parse and Sync: a `'now'` in
        // it is frozen at this instant, and the statement's executions run
        // in transactions of their own.
        self.pending_txn_start = None;
        Ok(PreparedStatement::new(sql.to_owned(), ast, prepared))
    }

    /// Runs `f` (the server's Bind decoding parameters) with the
    /// transaction clock armed as for a bind: a text parameter `'now'` is
    /// the start of the transaction the portal runs in.
    pub fn with_transaction_clock<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let (out, read) = crate::clock::armed(self.clock_start(), f);
        self.clock_was_read(read);
        out
    }

    /// What the transaction clock is armed with: the open transaction's
    /// start, else the one a statement bound before it fixed, else none
    /// (the first read takes the time).
    fn clock_start(&self) -> Option<i64> {
        self.open_txn().map(|_| self.txn_start_micros).or(self.pending_txn_start)
    }

    /// After an armed section: a time read outside a transaction is the
    /// start of the next one ([`Connection::ensure_txn`]).
    fn clock_was_read(&mut self, read: Option<i64>) {
        if self.open_txn().is_none() && read.is_some() {
            self.pending_txn_start = read;
        }
    }

    /// Binds and plans `stmt`, with the transaction clock (crate::clock)
    /// armed: date/time input words read the open transaction's start, or
    /// outside one the start of the transaction the statement will run in
    /// (kept in `pending_txn_start` for [`Connection::ensure_txn`]).
    fn bind(&mut self, stmt: &Statement) -> Result<Prepared> {
        self.enter();
        let (bound, read) = crate::clock::armed(self.clock_start(), || match self.open_txn() {
            Some(t) => bind_statement(t.catalog(), t, &path_for(&self.settings, t.catalog()), stmt),
            None => {
                let catalog = self.db.catalog();
                bind_statement(&catalog, &self.db, &path_for(&self.settings, &catalog), stmt)
            }
        });
        self.clock_was_read(read);
        let mut prepared = bound?;
        prepared.reads_clock = read.is_some();
        Ok(prepared)
    }

    /// Runs a statement; returns rows affected (or returned).
    pub fn execute(&mut self, stmt: &PreparedStatement, params: &[Value]) -> Result<u64> {
        let (_, n) = self.run(stmt, params)?;
        Ok(n)
    }

    /// Runs a query; returns its rows.
    pub fn query(&mut self, stmt: &PreparedStatement, params: &[Value]) -> Result<Rows> {
        self.run(stmt, params)?;
        let columns: Arc<[Column]> = self.current_columns(stmt).into();
        Ok(Rows { columns, buf: self.result.clone() })
    }

    /// Runs a query and lends its rows to `f` without copying them out
    /// (the zero-allocation path for hot loops).
    pub fn query_with<R>(
        &mut self,
        stmt: &PreparedStatement,
        params: &[Value],
        f: impl FnOnce(&[Value], usize) -> R,
    ) -> Result<R> {
        self.run(stmt, params)?;
        Ok(f(&self.result.values, self.result.width))
    }

    fn current_columns(&self, stmt: &PreparedStatement) -> Vec<Column> {
        let p = stmt.prepared.lock();
        let cols = p.columns();
        cols.iter().take(self.result.width).cloned().collect()
    }

    /// Runs one or more `;`-separated statements without parameters (the
    /// simple-query path); returns the last statement's result.
    pub fn execute_sql(&mut self, sql: &str) -> Result<ExecResult> {
        if let Some(stmt) = self.cache_stmt(sql)?
            && let StmtKind::Cache(statement) = stmt.kind()
        {
            return self.execute_cache(statement);
        }
        if self.block == Block::Failed {
            let stmts = crate::parse::parse_sql(sql);
            // ROLLBACK TO may be followed by more (psycopg sends "ROLLBACK
            // TO SAVEPOINT x; RELEASE x"): each is checked as it runs.
            let ends_block =
                matches!(stmts.as_deref(), Ok([Statement::Rollback { .. } | Statement::Commit { .. }, ..]));
            if !ends_block {
                return Err(SqlError::transaction_aborted());
            }
        }
        let stmts = match crate::parse::parse_sql(sql) {
            Ok(s) => s,
            Err(e) => {
                self.fail();
                cache::cache_statement_in(sql, true)?;
                return Err(prepared::parse_failure(sql, e));
            }
        };
        let mut last = ExecResult { tag: String::new(), rows_affected: 0, rows: None };
        for stmt in stmts {
            if prepared::is_utility(&stmt) {
                last = self.execute_utility(&stmt)?;
                continue;
            }
            let prepared = match self.bind(&stmt) {
                Ok(p) => p,
                Err(e) => {
                    // Binding inside an aborted block still answers 25P02.
                    if self.block == Block::Failed
                        && !matches!(stmt, Statement::Rollback { .. } | Statement::Commit { .. })
                    {
                        return Err(SqlError::transaction_aborted());
                    }
                    self.fail();
                    return Err(e);
                }
            };
            let ps = PreparedStatement::new(stmt.to_string(), Some(stmt), prepared);
            last = self.run_to_result(&ps, &[])?;
        }
        Ok(last)
    }

    /// SQL PREPARE, EXECUTE and DEALLOCATE in [`Connection::execute_sql`]:
    /// the same named statements the wire protocol's Parse defines.
    fn execute_utility(&mut self, ast: &Statement) -> Result<ExecResult> {
        let utility = match self.utility(ast) {
            Ok(u) => u,
            Err(e) => {
                self.fail();
                return Err(e);
            }
        };
        match utility {
            Utility::Done(tag) => Ok(ExecResult { tag: tag.to_string(), rows_affected: tag.rows(), rows: None }),
            Utility::Execute { stmt, params } => match stmt.kind() {
                StmtKind::Sql(ps) => self.run_to_result(ps, &params),
                _ => Err(SqlError::unsupported("EXECUTE of this statement")),
            },
            Utility::Rows { rows, tag } => {
                Ok(ExecResult { tag: tag.to_string(), rows_affected: tag.rows(), rows: Some(rows) })
            }
        }
    }

    fn run_to_result(&mut self, ps: &PreparedStatement, params: &[Value]) -> Result<ExecResult> {
        let (tag, n) = self.run(ps, params)?;
        let has_rows = matches!(ps.prepared.lock().plan, Plan::Select(_) | Plan::Show { .. })
            || !ps.prepared.lock().columns().is_empty();
        let rows = has_rows.then(|| Rows { columns: self.current_columns(ps).into(), buf: self.result.clone() });
        Ok(ExecResult { tag: tag.render(n), rows_affected: n, rows })
    }

    /// The user and database this session reports (current_user,
    /// current_database(), pg_database); the server passes the startup
    /// packet's `user` and `database`.
    pub fn set_identity(&mut self, user: &str, database: &str) {
        self.settings.set("session_authorization", user.to_owned());
        self.settings.set("pgtier.database", database.to_owned());
        self.settings.auth_mut().authenticated = user.to_owned();
    }

    /// Whether the session's current role is a superuser (the server's
    /// own statements: CHECKPOINT, BACKUP TO, pg_reload_conf()).
    pub fn is_superuser(&mut self) -> bool {
        let catalog = self.db.catalog();
        crate::catalog::roles::session_is_superuser(&catalog, &mut self.settings).unwrap_or(false)
    }

    /// The server authenticated `user`: privileges are checked as its
    /// role's (catalog/roles.rs), not as the embedded caller's, who owns
    /// the data directory and is a superuser.
    pub fn set_login(&mut self, user: &str, database: &str) {
        self.set_identity(user, database);
        let auth = self.settings.auth_mut();
        auth.trusted = false;
        auth.authenticated = user.to_owned();
        auth.unchecked_at = None;
        let catalog = self.db.catalog();
        let su = crate::catalog::roles::session_is_superuser(&catalog, &mut self.settings).unwrap_or(false);
        self.settings.set("is_superuser", if su { "on" } else { "off" }.to_owned());
    }

    /// NOTICEs raised since the last call, oldest first (a server sends
    /// them before the statement's result; embedded callers may log them).
    pub fn take_notices(&mut self) -> Vec<SqlNotice> {
        std::mem::take(&mut self.notices)
    }

    /// A setting's current value (`SHOW name`).
    pub fn setting(&self, name: &str) -> Option<&str> {
        self.settings.get(&name.to_lowercase()).map(String::as_str)
    }

    /// Makes `result` the buffer of statement `id`. Each statement writes
    /// its rows into its own buffer, overwriting its previous values in
    /// place: statements that alternate (TATP's two most frequent, of 34
    /// and 4 columns) no longer shrink and regrow one shared buffer, freeing
    /// and reallocating its strings each time.
    fn use_result_of(&mut self, id: u64) {
        if self.result_owner == id {
            return;
        }
        let current = std::mem::take(&mut self.result);
        let owner = std::mem::replace(&mut self.result_owner, id);
        if let Some(i) = self.parked_results.iter().position(|(parked, _)| *parked == id) {
            self.result = self.parked_results.swap_remove(i).1;
        }
        if owner != 0 && current.values.capacity() <= PARKED_VALUES_MAX {
            if self.parked_results.len() == PARKED_RESULTS_MAX {
                self.parked_results.remove(0);
            }
            self.parked_results.push((owner, current));
        }
    }

    /// Executes `stmt`; result rows land in `self.result`.
    fn run(&mut self, stmt: &PreparedStatement, params: &[Value]) -> Result<(Tag, u64)> {
        self.use_result_of(stmt.id);
        let prepared = stmt.prepared.lock().clone();
        if let Plan::Txn(cmd) = &prepared.plan {
            return self.txn_command(cmd);
        }
        if self.block == Block::Failed {
            return Err(SqlError::transaction_aborted());
        }
        if matches!(prepared.plan, Plan::SetConstraints { .. }) && self.block == Block::None {
            // PostgreSQL warns and runs it in its own transaction, to no effect.
            self.warnings.push(SqlNotice {
                sqlstate: "25P01",
                message: "SET CONSTRAINTS can only be used in transaction blocks".into(),
            });
        }
        let result = self.run_inner(stmt, prepared, params);
        match result {
            Ok(r) => {
                if self.block == Block::None {
                    self.commit_txn()?;
                }
                Ok(r)
            }
            Err(e) => {
                self.fail();
                Err(e)
            }
        }
    }

    fn run_inner(&mut self, stmt: &PreparedStatement, prepared: Arc<Prepared>, params: &[Value]) -> Result<(Tag, u64)> {
        self.enter();
        if let Some(answer) = self.session_command(&prepared.plan) {
            return answer;
        }
        if let Plan::SetAnalytics { table, on } = &prepared.plan {
            return self.set_analytics(&prepared.perms, table, *on);
        }
        self.refresh_analytics();
        let began_now = self.open_txn().is_none();
        self.ensure_txn()?;
        let prepared = self.current_plan(stmt, prepared)?;
        let Some(txn) = self.txn.as_mut() else { return Err(SqlError::new("XX000", "no transaction")) };
        crate::catalog::roles::check_relations(&prepared.perms, txn.catalog(), &mut self.settings)?;
        if params.len() < prepared.param_types.len() {
            return Err(SqlError::new(
                "08P01",
                format!(
                    "bind message supplies {} parameters, but prepared statement requires {}",
                    params.len(),
                    prepared.param_types.len()
                ),
            ));
        }
        let mut pbuf = std::mem::take(&mut self.params);
        pbuf.clear();
        let all_fit = convert_params(params, &prepared.param_types, self.txn_start_micros, &mut pbuf)?;
        let args: &[Value] = if all_fit { params } else { &pbuf };
        if began_now {
            txn.begin_first_statement()?
        } else {
            txn.begin_statement()?
        };
        // One branch when statement_timeout is off (the typed field, not a
        // settings lookup); otherwise one clock read per statement.
        let deadline = self.settings.statement_timeout().map(|t| Instant::now() + t);
        txn.set_statement_deadline(deadline);
        let mem_limit = self.settings.statement_mem_bytes();
        let mut ex = Exec {
            txn,
            now_micros: self.txn_start_micros,
            rowbuf: &mut self.rowbuf,
            keybuf: &mut self.keybuf,
            scratch: &mut self.scratch,
            dml_keys: &mut self.dml_keys,
            dml_row: &mut self.dml_row,
            row_pool: &mut self.row_pool,
            sub_cache: HashMap::new(),
            settings: &mut self.settings,
            notices: &mut self.notices,
            interrupt: Interrupt::new(self.cancel.as_deref(), deadline, mem_limit),
            cache: self.cache.as_deref(),
            analytics: self.analytics.as_deref(),
            sequences: &mut self.sequences,
            hash_joins: matches!(&prepared.plan, Plan::Select(s) if !s.for_update),
            level_hashes: LevelHashes::default(),
            work_tables: Vec::new(),
            shared_ctes: HashMap::new(),
            join_stop: false,
        };
        let out = &mut self.result;
        let r = run_modifying(&mut ex, &prepared.modifying, args, &mut self.temp.on_commit)
            .and_then(|()| run_plan(&mut ex, &prepared.plan, args, out, &mut self.temp.on_commit));
        if !matches!(
            prepared.plan,
            Plan::Select(_)
                | Plan::Insert(_)
                | Plan::Update(_)
                | Plan::Delete(_)
                | Plan::Partitioned(_)
                | Plan::Rules { .. }
        ) {
            out.reset(0);
        }
        if let Some(t) = self.txn.as_mut() {
            t.end_statement();
        }
        self.params = pbuf;
        r
    }

    /// SET, SHOW, EXPLAIN and the statements without an effect: answered
    /// by the session itself, in no transaction; None for every other plan.
    fn session_command(&mut self, plan: &Plan) -> Option<Result<(Tag, u64)>> {
        match plan {
            Plan::Set { name, value, local, reset } => {
                Some(self.set(name, value, *local).map(|r| if *reset { (Tag::Plain("RESET"), r.1) } else { r }))
            }
            Plan::Show { name } => Some(self.show(name)),
            Plan::Explain { lines, select, .. } => {
                self.refresh_analytics();
                let route = match select {
                    Some(s) => crate::exec::explain_route(s, self.analytics.as_deref(), self.settings.analytics()),
                    None => Vec::new(),
                };
                self.result.reset(1);
                for line in route.iter().chain(lines) {
                    self.result.push_row(&[Value::Text(line.clone())]);
                }
                Some(Ok((Tag::Plain("EXPLAIN"), (route.len() + lines.len()) as u64)))
            }
            Plan::Noop { tag: "VACUUM" } if self.in_transaction() => {
                Some(Err(SqlError::new("25001", "VACUUM cannot run inside a transaction block")))
            }
            Plan::Noop { tag } => {
                self.result.reset(0);
                Some(Ok((Tag::Plain(tag), 0)))
            }
            _ => None,
        }
    }

    /// The statement's plan, planned again from the saved statement when a
    /// table it uses changed, or the search path did.
    fn current_plan(&mut self, stmt: &PreparedStatement, prepared: Arc<Prepared>) -> Result<Arc<Prepared>> {
        let Some(txn) = self.txn.as_ref() else { return Err(SqlError::new("XX000", "no transaction")) };
        if prepared.is_current(txn.catalog()) && prepared.bound_under(self.settings.search_path_raw()) {
            return Ok(prepared);
        }
        let Some(ast) = &stmt.ast else { return Err(SqlError::new("XX000", "statement has no text to re-plan")) };
        // PostgreSQL analyses an invalidated statement again, in the
        // transaction that runs it: a 'now' in it reads that one.
        let (fresh, _) = crate::clock::armed(Some(self.txn_start_micros), || {
            bind_statement(txn.catalog(), txn, &path_for(&self.settings, txn.catalog()), ast)
        });
        let fresh = Arc::new(fresh?);
        // A client described the statement's rows when it prepared
        // it: PostgreSQL refuses a new shape rather than send rows the
        // description does not match.
        if fresh.columns() != prepared.columns() {
            return Err(SqlError::new("0A000", "cached plan must not change result type"));
        }
        *stmt.prepared.lock() = fresh.clone();
        Ok(fresh)
    }

    fn set(&mut self, name: &str, value: &str, local: bool) -> Result<(Tag, u64)> {
        let key = name.to_lowercase();
        let key = if key == "time zone" { "timezone".to_owned() } else { key };
        let Some(current) = self.settings.get(&key).cloned() else {
            return Err(SqlError::new("42704", format!("unrecognized configuration parameter \"{name}\"")));
        };
        if READ_ONLY_SETTINGS.contains(&key.as_str()) {
            return Err(SqlError::new("55P02", format!("parameter \"{key}\" cannot be changed")));
        }
        if SUPERUSER_SETTINGS.contains(&key.as_str()) {
            let catalog = self.db.catalog();
            if !crate::catalog::roles::session_is_superuser(&catalog, &mut self.settings)? {
                return Err(SqlError::new("42501", format!("permission denied to set parameter \"{key}\"")));
            }
        }
        let v = if value.eq_ignore_ascii_case("default") && key == "synchronous_commit" {
            self.default_synchronous_commit().to_owned()
        } else if value.eq_ignore_ascii_case("default") {
            self.settings.default_of(&key)
        } else if key == "datestyle" {
            crate::tz::normalize_datestyle(value, &current)?
        } else if key == "timezone" && value.eq_ignore_ascii_case("local") {
            self.settings.default_of(&key)
        } else {
            normalize_setting(&key, value)?
        };
        if matches!(key.as_str(), "timezone" | "datestyle" | "intervalstyle") {
            // Literals were read in the old zone or style when the cached
            // statements were planned (PostgreSQL parses a simple query anew).
            self.by_text.clear();
        }
        if local && self.block == Block::None {
            // PostgreSQL checks the value, warns, and changes nothing.
            self.warnings.push(SqlNotice {
                sqlstate: "25P01",
                message: "SET LOCAL can only be used in transaction blocks".into(),
            });
        } else {
            self.settings.set_scoped(&key, v, local);
        }
        self.result.reset(0);
        Ok((Tag::Plain("SET"), 0))
    }

    fn show(&mut self, name: &str) -> Result<(Tag, u64)> {
        let key = match name {
            "transaction isolation level" => "transaction_isolation".to_owned(),
            "time zone" => "timezone".to_owned(),
            // sqlparser splits `SHOW pgtier.statement_mem` into words.
            other if other.contains(' ') && !self.settings.contains_key(other) => other.replace(' ', "."),
            other => other.to_owned(),
        };
        let Some(v) = self.settings.get(&key) else {
            return Err(SqlError::new("42704", format!("unrecognized configuration parameter \"{name}\"")));
        };
        self.result.reset(1);
        self.result.push_row(&[Value::Text(v.clone())]);
        Ok((Tag::Plain("SHOW"), 1))
    }
}

/// Parameters already of their planned types are used in place (true);
/// only a statement with some to convert copies them all into `pbuf`
/// (text would allocate).
fn convert_params(
    params: &[Value],
    types: &[pgtier_engine::DataType],
    txn_start_micros: i64,
    pbuf: &mut Vec<Value>,
) -> Result<bool> {
    let all_fit = params.iter().zip(types).all(|(v, ty)| value::fits_unchanged(v, *ty));
    if !all_fit {
        // A text parameter 'now' is the transaction's start, as at
        // PostgreSQL's Bind.
        let (converted, _) = crate::clock::armed(Some(txn_start_micros), || {
            params.iter().zip(types).try_for_each(|(v, ty)| {
                pbuf.push(if value::fits_unchanged(v, *ty) { v.clone() } else { value::cast(v.clone(), *ty, false)? });
                Ok::<(), SqlError>(())
            })
        });
        converted?;
    }
    Ok(all_fit)
}

/// Runs a plan that needs the statement's transaction: one arm per
/// statement kind, each with its command tag.
/// Runs the data-modifying WITH queries, each to its end, keeping their
/// RETURNING rows for the references of the rest of the statement.
fn run_modifying(
    ex: &mut Exec<'_>,
    modifying: &[crate::plan::ModifyingCte],
    args: &[Value],
    temp_on_commit: &mut Vec<(pgtier_engine::TableId, crate::plan::OnCommit)>,
) -> Result<()> {
    // They write: no level of theirs is read once into a hash table.
    let hash_joins = std::mem::replace(&mut ex.hash_joins, false);
    let mut ran = Ok(());
    for m in modifying {
        let mut rows = ResultBuf::default();
        ran = run_plan(ex, &m.plan, args, &mut rows, temp_on_commit).map(|_| ());
        if ran.is_err() {
            break;
        }
        let bytes = rows.values.iter().map(crate::exec::value_bytes).sum();
        ran = ex.interrupt.charge(bytes, "WITH query");
        if ran.is_err() {
            break;
        }
        ex.shared_ctes.insert(m.id, std::sync::Arc::new(rows.values));
    }
    ex.hash_joins = hash_joins;
    ran
}

/// CREATE / DROP FUNCTION, CREATE / ALTER / DROP TRIGGER, CREATE / DROP
/// TYPE and DOMAIN.
fn run_routine(ex: &mut Exec<'_>, plan: &Plan) -> Result<(Tag, u64)> {
    let tag = match plan {
        Plan::CreateFunction(def) => ex.create_function(def).map(|()| "CREATE FUNCTION"),
        Plan::CreateType(def) => {
            ex.create_type(def).map(|()| if def.is_domain() { "CREATE DOMAIN" } else { "CREATE TYPE" })
        }
        Plan::DropType { names, if_exists, cascade, domain } => ex
            .drop_types(names, *if_exists, *cascade, *domain)
            .map(|()| if *domain { "DROP DOMAIN" } else { "DROP TYPE" }),
        Plan::CreateTrigger { table, name, doc, replace } => {
            ex.create_trigger(table, name, doc, *replace).map(|()| "CREATE TRIGGER")
        }
        Plan::AlterTrigger { table, name, doc } => ex.create_trigger(table, name, doc, true).map(|()| "ALTER TABLE"),
        Plan::DropTrigger { table, name, if_exists } => {
            ex.drop_trigger(table, name, *if_exists).map(|()| "DROP TRIGGER")
        }
        Plan::CreateRule { table, name, doc, replace } => {
            ex.create_rule(table, name, doc, *replace).map(|()| "CREATE RULE")
        }
        Plan::DropRule { table, name, if_exists } => ex.drop_rule(table, name, *if_exists).map(|()| "DROP RULE"),
        Plan::DropFunction { targets, if_exists } => ex.drop_functions(targets, *if_exists).map(|()| "DROP FUNCTION"),
        _ => Err(SqlError::new("XX000", "not a function or trigger statement")),
    }?;
    Ok((Tag::Plain(tag), 0))
}

/// An INSERT / UPDATE / DELETE as rules rewrote it (`Plan::Rules`).
fn run_rules(
    ex: &mut Exec<'_>,
    plans: &[Plan],
    result: Option<usize>,
    tag: &'static str,
    args: &[Value],
    out: &mut ResultBuf,
    temp_on_commit: &mut Vec<(pgtier_engine::TableId, crate::plan::OnCommit)>,
) -> Result<(Tag, u64)> {
    let mut done = (Tag::Counted(tag), 0);
    out.reset(0);
    for (k, p) in plans.iter().enumerate() {
        if result == Some(k) {
            let n = run_plan(ex, p, args, out, temp_on_commit)?.1;
            // Only a statement of the original's kind sets the count
            // (PostgreSQL's canSetTag); a SELECT action's rows come with
            // the original's tag and 0.
            let same = matches!(
                (p, tag),
                (Plan::Insert(_), "INSERT 0") | (Plan::Update(_), "UPDATE") | (Plan::Delete(_), "DELETE")
            );
            done.1 = if same { n } else { 0 };
        } else {
            run_plan(ex, p, args, &mut ResultBuf::default(), temp_on_commit)?;
        }
    }
    Ok(done)
}

fn run_plan(
    ex: &mut Exec<'_>,
    plan: &Plan,
    args: &[Value],
    out: &mut ResultBuf,
    temp_on_commit: &mut Vec<(pgtier_engine::TableId, crate::plan::OnCommit)>,
) -> Result<(Tag, u64)> {
    match plan {
        Plan::Select(s) => ex.select(s, args, out).map(|()| (Tag::Counted("SELECT"), out.rows as u64)),
        Plan::Insert(i) => ex.insert(i, args, out).map(|n| (Tag::Counted("INSERT 0"), n)),
        Plan::Update(u) => ex.update(u, args, out).map(|n| (Tag::Counted("UPDATE"), n)),
        Plan::Delete(d) => ex.delete(d, args, out).map(|n| (Tag::Counted("DELETE"), n)),
        Plan::Merge(m) => ex.merge(m, args, out).map(|n| (Tag::Counted("MERGE"), n)),
        Plan::Partitioned(plans) => {
            let mut done = (Tag::Counted("UPDATE"), 0);
            for (k, p) in plans.iter().enumerate() {
                let mut rows = ResultBuf::default();
                let (tag, n) = run_plan(ex, p, args, &mut rows, temp_on_commit)?;
                if k == 0 {
                    out.reset(rows.width);
                }
                out.values.extend(rows.values);
                out.rows += rows.rows;
                done = (tag, done.1 + n);
            }
            Ok(done)
        }
        Plan::Rules { plans, result, tag } => run_rules(ex, plans, *result, tag, args, out, temp_on_commit),
        Plan::AttachPartition { .. } | Plan::DetachPartition { .. } | Plan::CreatePartition { .. } => {
            run_partition_plan(ex, plan)
        }
        Plan::CreateTable { def, if_not_exists, sequences, indexes } => ex
            .create_table_with_sequences(def, sequences, indexes, *if_not_exists)
            .map(|()| (Tag::Plain("CREATE TABLE"), 0)),
        Plan::CreateSequence { name, options, if_not_exists } => {
            ex.create_sequence(name, options, *if_not_exists).map(|()| (Tag::Plain("CREATE SEQUENCE"), 0))
        }
        Plan::CreateIndex { def, if_not_exists } => {
            ex.create_index(def, *if_not_exists).map(|()| (Tag::Plain("CREATE INDEX"), 0))
        }
        Plan::CreateTableAs { def, query, if_not_exists } => {
            ex.create_table_as(def, query, *if_not_exists, args).map(|n| (Tag::Counted("SELECT"), n))
        }
        Plan::CreateTemp { create, on_commit } => {
            let (r, name) = match create.as_ref() {
                Plan::CreateTable { def, if_not_exists, sequences, indexes } => (
                    ex.create_table_with_sequences(def, sequences, indexes, *if_not_exists)
                        .map(|()| (Tag::Plain("CREATE TABLE"), 0)),
                    &def.name,
                ),
                Plan::CreateTableAs { def, query, if_not_exists } => (
                    ex.create_table_as(def, query, *if_not_exists, args).map(|n| (Tag::Counted("SELECT"), n)),
                    &def.name,
                ),
                _ => (Err(SqlError::new("XX000", "CREATE TEMP of another statement")), &String::new()),
            };
            if r.is_ok()
                && *on_commit != crate::plan::OnCommit::PreserveRows
                && let Some(t) = ex.txn.catalog().table_by_name(name)
            {
                temp_on_commit.push((t.id, *on_commit));
            }
            r
        }
        Plan::Truncate { tables, restart_identity } => {
            ex.truncate(tables, *restart_identity).map(|()| (Tag::Plain("TRUNCATE TABLE"), 0))
        }
        Plan::DropTable { names, if_exists, sequences, cascade } => {
            let tag = if *sequences { "DROP SEQUENCE" } else { "DROP TABLE" };
            ex.drop_tables(names, *if_exists, *sequences, *cascade).map(|()| (Tag::Plain(tag), 0))
        }
        Plan::CreateSchema { name, owner, if_not_exists } => {
            ex.create_schema(name, owner.as_deref(), *if_not_exists).map(|()| (Tag::Plain("CREATE SCHEMA"), 0))
        }
        Plan::CreateFunction(_)
        | Plan::CreateType(_)
        | Plan::DropType { .. }
        | Plan::DropFunction { .. }
        | Plan::CreateTrigger { .. }
        | Plan::AlterTrigger { .. }
        | Plan::DropTrigger { .. }
        | Plan::CreateRule { .. }
        | Plan::DropRule { .. } => run_routine(ex, plan),
        Plan::DropSchema { names, if_exists, cascade } => {
            ex.drop_schemas(names, *if_exists, *cascade).map(|()| (Tag::Plain("DROP SCHEMA"), 0))
        }
        Plan::CreateView { def, replace } => ex.create_view(def, *replace).map(|()| (Tag::Plain("CREATE VIEW"), 0)),
        Plan::DropView { names, if_exists, cascade } => {
            ex.drop_views(names, *if_exists, *cascade).map(|()| (Tag::Plain("DROP VIEW"), 0))
        }
        Plan::DropIndex { names, if_exists } => {
            ex.drop_indexes(names, *if_exists).map(|()| (Tag::Plain("DROP INDEX"), 0))
        }
        Plan::AlterTable(a) => ex.alter_table(a).map(|()| (Tag::Plain(a.tag), 0)),
        Plan::SetConstraints { which, deferred } => {
            ex.txn.set_constraints(which.as_deref(), *deferred)?;
            Ok((Tag::Plain("SET CONSTRAINTS"), 0))
        }
        Plan::Dcl(d) => ex.dcl(d).map(|tag| (Tag::Plain(tag), 0)),
        // The session runs it (session/analytics.rs); reached only from
        // inside a transaction (a function's body).
        Plan::SetAnalytics { .. } => {
            Err(SqlError::new("25001", "ALTER TABLE ... SET ANALYTICS cannot run inside a transaction block"))
        }
        Plan::Txn(_) | Plan::Set { .. } | Plan::Show { .. } | Plan::Explain { .. } | Plan::Noop { .. } => {
            Ok((Tag::Plain(""), 0))
        }
    }
}

/// ATTACH / DETACH PARTITION and CREATE TABLE ... PARTITION OF.
fn run_partition_plan(ex: &mut Exec<'_>, plan: &Plan) -> Result<(Tag, u64)> {
    match plan {
        Plan::AttachPartition { checks, parent, partition, guard, guard_bound, default_name } => {
            for (table, check) in checks {
                ex.attach_partition(table, check)?;
            }
            ex.add_partition(parent, partition, guard, guard_bound.as_ref(), default_name)
                .map(|()| (Tag::Plain("ALTER TABLE"), 0))
        }
        Plan::DetachPartition { parent, name } => {
            ex.detach_partition(parent, name).map(|()| (Tag::Plain("ALTER TABLE"), 0))
        }
        Plan::CreatePartition { create, parent, partition, guard, guard_bound, default_name } => {
            let Plan::CreateTable { def, if_not_exists, sequences, indexes } = create.as_ref() else {
                return Err(SqlError::new("XX000", "PARTITION OF without its CREATE TABLE"));
            };
            if *if_not_exists && ex.txn.catalog().table_by_name(&def.name).is_some() {
                return ex.create_table(def, true).map(|()| (Tag::Plain("CREATE TABLE"), 0));
            }
            ex.create_table_with_sequences(def, sequences, indexes, false)?;
            ex.add_partition(parent, partition, guard, guard_bound.as_ref(), default_name)
                .map(|()| (Tag::Plain("CREATE TABLE"), 0))
        }
        _ => Err(SqlError::new("XX000", "a partition plan expected")),
    }
}

// ------------------------------------------------------------------------
// Wire-protocol server API (crates/server): rows lent without copying them.
// The statements the protocol names, transaction blocks and PREPARE are in
// session/statement.rs, session/block.rs and session/prepared.rs.

impl Connection {
    /// Runs `stmt` and lends its result rows to `rows` without copying them
    /// out; returns the command tag and what `rows` returned.
    pub fn execute_with<R>(
        &mut self,
        stmt: &PreparedStatement,
        params: &[Value],
        rows: impl FnOnce(ResultRows<'_>) -> R,
    ) -> Result<(CommandTag, R)> {
        let (tag, n) = self.run(stmt, params)?;
        let r = &self.result;
        let end = (r.rows * r.width).min(r.values.len());
        let out = rows(ResultRows { values: &r.values[..end], width: r.width, rows: r.rows });
        Ok((CommandTag { tag, rows: n }, out))
    }
}

/// The search path names are resolved under, from the session's settings.
fn path_for(
    settings: &crate::settings::Settings,
    catalog: &pgtier_engine::Catalog,
) -> crate::catalog::search_path::SearchPath {
    let user = settings.get("session_authorization").map_or("", String::as_str);
    let temp = settings.get(crate::names::TEMP_SCHEMA_SETTING).map_or("", String::as_str);
    crate::catalog::search_path::SearchPath::new(Arc::clone(settings.search_path_raw()), user, temp, catalog)
}
