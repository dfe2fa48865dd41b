//! The session's statements: by name, by SQL text, and SQL-level PREPARE,
//! EXECUTE and DEALLOCATE. As in PostgreSQL these live with the backend,
//! not the protocol layer: the wire protocol's named statements (Parse)
//! and PREPAREd ones share one namespace, so either can run the other's.
//!
//! A per-session cache keyed by SQL text (and the declared parameter types)
//! lets simple queries (`BEGIN`, `COMMIT`, ...) and unnamed Parse (psycopg,
//! pgx) skip parse/bind/plan. A cached plan re-plans itself when a table it
//! uses changed.

use std::any::Any;
use std::sync::Arc;

use pgtier_engine::Value;
use sqlparser::ast::Statement;

use super::rows::{CommandTag, Tag};
use super::statement::{PreparedStatement, Stmt, StmtKind, TxnKind, classify};
use super::{Block, Connection};
use crate::error::{Result, SqlError};
use crate::value;

/// Statements kept by SQL text per session; the cache is dropped whole
/// when full (simple, and a workload has few distinct texts).
const TEXT_CACHE_MAX: usize = 256;

/// Where a statement the binder refused may run instead: the server's
/// passthrough to PostgreSQL. Installed with [`Connection::set_fallback`].
pub trait Fallback: Send {
    /// `ast` failed to bind with `err`. Ok: the statement the server runs
    /// in its place (kept as [`StmtKind::Foreign`]); Err: the error to
    /// report (`err` itself, or a better one). `superuser`: the session's
    /// current role is one (what another system runs on the session's
    /// behalf may be for superusers only).
    fn adopt(&self, ast: &Statement, err: SqlError, superuser: bool) -> Result<Box<dyn Any + Send + Sync>>;
}

/// What [`Connection::utility`] did.
pub enum Utility {
    /// PREPARE or DEALLOCATE: done; the command tag.
    Done(CommandTag),
    /// EXECUTE: run `stmt` with `params` (the arguments evaluated and cast
    /// to its parameter types), as [`Via::Prepared`](super::Via::Prepared).
    Execute { stmt: Arc<Stmt>, params: Vec<Value> },
    /// FETCH: the cursor's rows, sent as a query's are.
    Rows { rows: super::Rows, tag: CommandTag },
}

impl Connection {
    /// Installs where statements the binder refuses may run instead (see
    /// [`Fallback`]). Without one a bind error is the statement's error.
    pub fn set_fallback(&mut self, fallback: Box<dyn Fallback>) {
        self.fallback = Some(fallback);
    }

    /// Parses `sql` into its statements (the simple-query protocol runs them
    /// one by one). A syntax error aborts an open block, as in PostgreSQL.
    pub fn parse_statements(&mut self, sql: &str) -> Result<Vec<Statement>> {
        match crate::parse::parse_sql(sql) {
            Ok(stmts) => Ok(stmts),
            Err(e) => {
                self.fail();
                // A cache-group statement among others: refused as such
                // (25001), not as the syntax error sqlparser sees.
                super::cache::cache_statement_in(sql, true)?;
                Err(parse_failure(sql, e))
            }
        }
    }

    /// Plans one parsed statement. In a failed block only COMMIT/ROLLBACK
    /// are accepted (25P02 otherwise), as PostgreSQL's Parse does.
    pub fn prepare_statement(&mut self, stmt: Statement) -> Result<PreparedStatement> {
        self.try_prepare_statement(stmt).inspect_err(|_| self.fail())
    }

    /// As [`Connection::prepare_statement`], but a bind error leaves an open
    /// block as it is: the caller decides whether it fails the block.
    pub fn try_prepare_statement(&mut self, stmt: Statement) -> Result<PreparedStatement> {
        let ends_block = matches!(stmt, Statement::Rollback { .. } | Statement::Commit { .. });
        if self.block == Block::Failed && !ends_block {
            return Err(SqlError::transaction_aborted());
        }
        let p = self.bind(&stmt)?;
        Ok(PreparedStatement::new(stmt.to_string(), Some(stmt), p))
    }

    /// Plans a statement given as text (COPY's own queries, EXECUTE's
    /// arguments); of several, the last.
    pub fn prepare_text(&mut self, sql: &str) -> Result<PreparedStatement> {
        let mut stmts = self.parse_statements(sql)?;
        let stmt = stmts.pop().ok_or_else(|| SqlError::syntax("empty statement"))?;
        self.prepare_statement(stmt)
    }

    /// The statement cached for this text, if any.
    pub fn cached_stmt(&self, sql: &str) -> Option<Arc<Stmt>> {
        self.by_text.get(sql).filter(|s| self.text_plan_current(s)).cloned()
    }

    /// Parses and plans `sql` (one statement; `declared` parameter OIDs, 0:
    /// infer), re-using a cached plan for the same text and declared types.
    pub fn prepare_stmt(&mut self, sql: &str, declared: &[u32]) -> Result<Arc<Stmt>> {
        if let Some(s) = self.by_text.get(sql)
            && s.declared() == declared
            && self.text_plan_current(s)
        {
            let s = s.clone();
            self.check_bindable(&s)?;
            return Ok(s);
        }
        if let Some(stmt) = self.cache_stmt(sql)? {
            if self.block == Block::Failed {
                return Err(SqlError::transaction_aborted());
            }
            return Ok(stmt);
        }
        let mut stmts = self.parse_statements(sql)?;
        if stmts.len() > 1 {
            self.fail();
            return Err(SqlError::syntax("cannot insert multiple commands into a prepared statement"));
        }
        let stmt = self.build_stmt(stmts.pop(), declared.to_vec())?;
        // A plan holding the transaction clock's instant ('now') is bound
        // again for each run of the text, as PostgreSQL parses it again.
        if let StmtKind::Sql(ps) = stmt.kind()
            && !ps.prepared.lock().reads_clock
        {
            if self.by_text.len() >= TEXT_CACHE_MAX {
                self.by_text.clear();
            }
            self.by_text.insert(sql.to_owned(), stmt.clone());
        }
        Ok(stmt)
    }

    /// Makes a statement of `ast` (None: an empty query). An error fails
    /// an open block; a bind error the [`Fallback`] takes over does not
    /// (the statement may still run elsewhere, in the block).
    pub fn build_stmt(&mut self, ast: Option<Statement>, declared: Vec<u32>) -> Result<Arc<Stmt>> {
        let Some(ast) = ast else { return Ok(Arc::new(Stmt::new(StmtKind::Empty, declared, TxnKind::None, false))) };
        let (txn, is_set) = classify(&ast);
        if matches!(ast, Statement::Copy { .. }) || is_utility(&ast) {
            if self.block == Block::Failed {
                return Err(SqlError::transaction_aborted());
            }
            let kind = if matches!(ast, Statement::Copy { .. }) {
                StmtKind::Copy(Box::new(ast))
            } else {
                StmtKind::Utility(Box::new(ast))
            };
            return Ok(Arc::new(Stmt::new(kind, declared, txn, is_set)));
        }
        if self.fallback.is_none() {
            let ps = self.prepare_statement(ast)?;
            return Ok(Arc::new(Stmt::new(StmtKind::Sql(Box::new(ps)), declared, txn, is_set)));
        }
        // The AST is kept (cloned) only when the fallback may need it after
        // the binder refused the statement.
        let kept = ast.clone();
        let err = match self.try_prepare_statement(ast) {
            Ok(ps) => return Ok(Arc::new(Stmt::new(StmtKind::Sql(Box::new(ps)), declared, txn, is_set))),
            Err(e) => e,
        };
        let catalog = self.db.catalog();
        let superuser = crate::catalog::roles::session_is_superuser(&catalog, &mut self.settings)?;
        let adopted = match &self.fallback {
            Some(fallback) => fallback.adopt(&kept, err, superuser),
            None => Err(err),
        };
        match adopted {
            Ok(foreign) => Ok(Arc::new(Stmt::new(StmtKind::Foreign(foreign), declared, txn, is_set))),
            Err(e) => {
                self.fail();
                Err(e)
            }
        }
    }

    /// Whether a statement cached by text would be bound the same way now:
    /// same search_path, no table or index added or removed since (its
    /// names could resolve to another relation), every relation it uses
    /// unchanged. PostgreSQL parses a text again each time it arrives, so
    /// a stale one is planned afresh here (a new statement, new columns)
    /// rather than re-planned in place at run time, where a changed result
    /// shape is an error for the statements clients named.
    fn text_plan_current(&self, s: &Stmt) -> bool {
        let StmtKind::Sql(ps) = s.kind() else { return true };
        let prepared = ps.prepared.lock().clone();
        if !prepared.bound_under(self.settings.search_path_raw()) {
            return false;
        }
        let current = |catalog: &pgtier_engine::Catalog| {
            catalog.names_stamp() == prepared.names_stamp && prepared.is_current(catalog)
        };
        match self.open_txn() {
            Some(t) => current(t.catalog()),
            None => current(&self.db.catalog()),
        }
    }

    /// A named statement (Parse with a name, or PREPARE).
    pub fn named_stmt(&self, name: &str) -> Option<Arc<Stmt>> {
        self.named.get(name).cloned()
    }

    /// Names `stmt` (Parse with a name); 42P05 if the name is taken.
    pub fn define_stmt(&mut self, name: String, stmt: Arc<Stmt>) -> Result<()> {
        if self.named.contains_key(&name) {
            return Err(SqlError::new("42P05", format!("prepared statement \"{name}\" already exists")));
        }
        self.named.insert(name, stmt);
        Ok(())
    }

    /// Forgets a named statement (Close); an unknown name is no error.
    pub fn close_stmt(&mut self, name: &str) {
        self.named.remove(name);
    }

    /// In a failed block only COMMIT and ROLLBACK may be bound or run
    /// (25P02 otherwise), as PostgreSQL's Bind answers.
    pub fn check_bindable(&self, stmt: &Stmt) -> Result<()> {
        if self.block == Block::Failed && !stmt.txn.accepted_when_failed() {
            return Err(SqlError::transaction_aborted());
        }
        Ok(())
    }

    /// PREPARE name [(types)] AS stmt, EXECUTE name [(args)], DEALLOCATE
    /// [PREPARE] name | ALL (a [`StmtKind::Utility`]).
    pub fn utility(&mut self, ast: &Statement) -> Result<Utility> {
        let done = |tag| Ok(Utility::Done(CommandTag { tag: Tag::Plain(tag), rows: 0 }));
        match ast {
            Statement::Prepare { name, data_types, statement } => {
                let name = ident_name(name);
                if self.named.contains_key(&name) {
                    return Err(SqlError::new("42P05", format!("prepared statement \"{name}\" already exists")));
                }
                let declared = data_types.iter().map(declared_oid).collect();
                let stmt = self.build_stmt(Some((**statement).clone()), declared)?;
                self.named.insert(name, stmt);
                done("PREPARE")
            }
            Statement::Execute { name: Some(name), parameters, .. } => {
                let name = name.0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(".");
                let name = if name.starts_with('"') { name.trim_matches('"').to_owned() } else { name.to_lowercase() };
                let stmt = self
                    .named_stmt(&name)
                    .ok_or_else(|| SqlError::new("26000", format!("prepared statement \"{name}\" does not exist")))?;
                if !matches!(stmt.kind(), StmtKind::Sql(_)) {
                    return Err(SqlError::unsupported("EXECUTE of this statement"));
                }
                let types = stmt.param_types();
                if parameters.len() != types.len() {
                    return Err(SqlError::new(
                        "42601",
                        format!("wrong number of parameters for prepared statement \"{name}\""),
                    )
                    .with_detail(format!(
                        "Expected {} parameters but got {}.",
                        types.len(),
                        parameters.len()
                    )));
                }
                let mut params = Vec::with_capacity(parameters.len());
                if !parameters.is_empty() {
                    // The arguments are expressions: evaluate them as a
                    // SELECT, each cast to its parameter's type there (so a
                    // literal is read in that type's context, as PostgreSQL
                    // does: -1e300 for a double precision parameter).
                    let list = parameters
                        .iter()
                        .zip(types)
                        .map(|(p, ty)| format!("CAST(({p}) AS {})", value::full_type_name(*ty)))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let probe = self.prepare_text(&format!("SELECT {list}"))?;
                    let (_, values) = self.execute_with(&probe, &[], |r| r.values.to_vec())?;
                    for (v, ty) in values.into_iter().zip(types) {
                        params.push(value::cast(v, *ty, true)?);
                    }
                }
                Ok(Utility::Execute { stmt, params })
            }
            Statement::Deallocate { name, .. } => {
                if name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all") {
                    self.named.clear();
                    return done("DEALLOCATE ALL");
                }
                let name = ident_name(name);
                if self.named.remove(&name).is_none() {
                    return Err(SqlError::new("26000", format!("prepared statement \"{name}\" does not exist")));
                }
                done("DEALLOCATE")
            }
            Statement::Declare { stmts } => self.declare_cursor(stmts),
            Statement::Fetch { name, direction, into, .. } => self.fetch_cursor(name, direction, into.is_some()),
            Statement::Close { cursor } => self.close_cursor(cursor),
            other => Err(SqlError::unsupported(other.to_string())),
        }
    }
}

/// PREPARE, EXECUTE and DEALLOCATE: statements about the session's named
/// statements, and DECLARE, FETCH/MOVE and CLOSE about its cursors; run
/// by [`Connection::utility`], never bound.
pub(super) fn is_utility(ast: &Statement) -> bool {
    matches!(
        ast,
        Statement::Prepare { .. }
            | Statement::Execute { .. }
            | Statement::Deallocate { .. }
            | Statement::Declare { .. }
            | Statement::Fetch { .. }
            | Statement::Close { .. }
    )
}

/// An SQL identifier as PostgreSQL folds it (unquoted: lower case).
pub(super) fn ident_name(i: &sqlparser::ast::Ident) -> String {
    if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() }
}

/// The OID of a type named in PREPARE's list, as the catalog reports the
/// type (one mechanism with `pg_type` and the wire's RowDescription); 0
/// (infer it from the statement) for the SQL layer's pseudo types and names
/// pgtier does not know. The server decodes a Bind parameter by the OID
/// declared for it.
fn declared_oid(t: &sqlparser::ast::DataType) -> u32 {
    match crate::bind::map_type(t) {
        Ok(ty) if !crate::value::types::is_pseudo(ty) => {
            u32::try_from(crate::catalog::column_type_info(ty).type_oid).unwrap_or(0)
        }
        _ => 0,
    }
}

/// The error of a text sqlparser could not read: 0A000 naming the form
/// when PostgreSQL takes it and pgtier lacks it (`parse::unsupported_form`),
/// else the syntax error.
pub(super) fn parse_failure(sql: &str, e: sqlparser::parser::ParserError) -> SqlError {
    match crate::parse::unsupported_form(sql) {
        Some(form) => SqlError::unsupported(form),
        None => e.into(),
    }
}
