//! The simple query protocol: a Query message of zero, one or several
//! statements, each answered as it runs (RowDescription, DataRows in text,
//! CommandComplete), then ReadyForQuery. A statement's error stops the
//! rest. Several statements are one implicit transaction block unless they
//! manage transactions themselves; the Connection opens it and ends it
//! with the message.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use pgtier_sql::SqlError;
use pgtier_sql::session::{Stmt, StmtKind, Via};

use super::Session;
use crate::passthrough::remote;

impl Session {
    pub(super) fn simple_query(&mut self, sql: &str) {
        let result = self.simple_query_inner(sql);
        self.forward_notices();
        if let Err(e) = result {
            self.conn.statement_failed();
            self.wire.error_at(&e, "ERROR", e.position_in(sql));
        }
        // The end of the message ends its statements' implicit block: a
        // failing commit is the message's error.
        if let Err(e) = self.conn.end_implicit_block() {
            self.conn.statement_failed();
            self.wire.error_at(&e, "ERROR", e.position_in(sql));
        }
    }

    fn simple_query_inner(&mut self, sql: &str) -> Result<(), SqlError> {
        // The common case, one statement, goes through the text cache.
        if let Some(s) = self.conn.cached_stmt(sql) {
            return self.simple_one(&s);
        }
        if sql.trim().trim_end_matches(';').trim().eq_ignore_ascii_case("checkpoint") {
            // PostgreSQL's CHECKPOINT: here the engine's (WAL truncated
            // below it, so the next start replays little).
            self.conn.database().checkpoint()?;
            self.wire.command_complete("CHECKPOINT");
            return Ok(());
        }
        if let Some(dir) = super::backup::parse_backup(sql) {
            return self.backup(&dir?);
        }
        if let Some(s) = self.conn.cache_stmt(sql)? {
            return self.simple_one(&s);
        }
        let stmts = self.conn.parse_statements(sql)?;
        if stmts.is_empty() {
            self.wire.empty_query();
            return Ok(());
        }
        if stmts.len() == 1 {
            let s = self.conn.prepare_stmt(sql, &[])?;
            return self.simple_one(&s);
        }
        self.conn.begin_implicit_query(&stmts)?;
        for ast in stmts {
            if self.cancel.swap(false, Ordering::Relaxed) {
                return Err(SqlError::canceled());
            }
            let s = self.conn.build_stmt(Some(ast), Vec::new())?;
            self.simple_one(&s)?;
        }
        Ok(())
    }

    fn simple_one(&mut self, s: &Arc<Stmt>) -> Result<(), SqlError> {
        match s.kind() {
            StmtKind::Empty => {
                self.wire.empty_query();
                Ok(())
            }
            StmtKind::Copy(ast) => self.copy(ast, false),
            StmtKind::Utility(ast) => self.utility(ast),
            StmtKind::Cache(statement) => self.cache_statement(statement),
            StmtKind::Foreign(_) => {
                let r = remote(s)?;
                let mut backend = self.backend()?;
                let result = r.run_simple(backend.lease(), &mut self.wire.wbuf);
                self.keep_backend(backend);
                result
            }
            StmtKind::Sql(_) => {
                self.run_statement(s, &[], Via::Query, None)?;
                if s.is_set() {
                    self.report_changes();
                }
                Ok(())
            }
        }
    }
}
