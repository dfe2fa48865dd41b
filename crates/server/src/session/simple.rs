//! The simple query protocol: a Query message of zero, one or several
//! statements, each answered as it runs (RowDescription, DataRows in text,
//! CommandComplete), then ReadyForQuery. A statement's error stops the
//! rest. Several statements are one implicit transaction block unless they
//! manage transactions themselves; the Connection opens it and ends it
//! with the message.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use pgtier_sql::SqlError;
use pgtier_sql::session::{Stmt, StmtKind, TransactionStatus, Via};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::{DataRow, FieldDescription, RowDescription};

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
            if !self.conn.is_superuser() {
                return Err(SqlError::new("42501", "must be superuser to do CHECKPOINT"));
            }
            self.conn.database().checkpoint()?;
            self.wire.command_complete("CHECKPOINT");
            return Ok(());
        }
        if is_reload_conf(sql) && self.conn.transaction_status() != TransactionStatus::Failed {
            if !self.conn.is_superuser() {
                return Err(SqlError::new("42501", "permission denied for function pg_reload_conf"));
            }
            self.reload_conf();
            return Ok(());
        }
        if is_replication_view(sql) {
            return self.replication_view();
        }
        if is_promote(sql) && self.conn.transaction_status() == TransactionStatus::Idle {
            if !self.conn.is_superuser() {
                return Err(SqlError::new("42501", "permission denied for function pg_promote"));
            }
            return self.promote();
        }
        if is_switchover(sql) && self.conn.transaction_status() == TransactionStatus::Idle {
            if !self.conn.is_superuser() {
                return Err(SqlError::new("42501", "permission denied for function pgtier_switchover"));
            }
            return self.switchover();
        }
        if let Some(dir) = super::backup::parse_backup(sql) {
            if !self.conn.is_superuser() {
                return Err(SqlError::new("42501", "must be superuser to run BACKUP TO"));
            }
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

/// `SELECT pg_reload_conf()` as psql and scripts send it: answered by the
/// server, which owns the configuration (the SQL layer knows no config
/// file). Other spellings (in a larger query, in the extended protocol)
/// reach the SQL layer, which does not know the function.
fn is_reload_conf(sql: &str) -> bool {
    let words: String = sql.trim().trim_end_matches(';').split_whitespace().collect::<Vec<_>>().join(" ");
    let words = words.to_ascii_lowercase().replace("( )", "()");
    matches!(words.as_str(), "select pg_reload_conf()" | "select pg_catalog.pg_reload_conf()")
}

/// `SELECT * FROM pgtier_replication`: one row of `[replication]`'s state
/// (answered by the server, simple protocol only; `pgtier status` reads it).
fn is_replication_view(sql: &str) -> bool {
    let words: String = sql.trim().trim_end_matches(';').split_whitespace().collect::<Vec<_>>().join(" ");
    words.eq_ignore_ascii_case("select * from pgtier_replication")
}

/// `SELECT pgtier_switchover()`: the active hands the writes to its standby.
fn is_switchover(sql: &str) -> bool {
    let words: String = sql.trim().trim_end_matches(';').split_whitespace().collect::<Vec<_>>().join(" ");
    matches!(words.to_ascii_lowercase().replace("( )", "()").as_str(), "select pgtier_switchover()")
}

/// `SELECT pg_promote()` (also with PostgreSQL's arguments `wait` and
/// `wait_seconds`: pgtier's promotion always completes before it answers).
fn is_promote(sql: &str) -> bool {
    let words: String = sql.trim().trim_end_matches(';').split_whitespace().collect::<Vec<_>>().join(" ");
    let words = words.to_ascii_lowercase().replace("( )", "()");
    let Some(rest) = words.strip_prefix("select ").map(|w| w.strip_prefix("pg_catalog.").unwrap_or(w)) else {
        return false;
    };
    let Some(args) = rest.strip_prefix("pg_promote(").and_then(|r| r.strip_suffix(')')) else { return false };
    args.split(',').all(|a| {
        let a = a.trim();
        a.is_empty() || a == "true" || a == "false" || a.bytes().all(|b| b.is_ascii_digit())
    })
}

impl Session {
    /// pg_promote(): a standby becomes the active ([replication], crate
    /// replication.rs). Answers true once done, as PostgreSQL's with
    /// `wait => true`; on a server that is not a standby, PostgreSQL's
    /// 55000 "recovery is not in progress".
    fn promote(&mut self) -> Result<(), SqlError> {
        let not_standby = || {
            SqlError::new("55000", "recovery is not in progress")
                .with_hint("\"pg_promote()\" can only be executed during recovery.")
        };
        let Some(replication) = self.shared.replication.clone() else { return Err(not_standby()) };
        match replication.promote() {
            Ok(cache) => self.shared.promoted(cache),
            Err((_, e)) if !replication.is_standby() && e == "recovery is not in progress" => {
                return Err(not_standby());
            }
            Err((code, e)) => return Err(SqlError::new(code, format!("promotion: {e}"))),
        }
        self.send_true_row("pg_promote");
        Ok(())
    }

    /// pgtier_switchover(): the active stops writing, waits for its
    /// standby to have everything and gives the pair's lease up; the
    /// standby promotes on its next poll (replication/failover.rs).
    fn switchover(&mut self) -> Result<(), SqlError> {
        let Some(replication) = self.shared.replication.clone() else {
            return Err(SqlError::new("55000", "replication is not configured").with_hint("Set [replication] role."));
        };
        replication.switchover().map_err(|(code, message)| SqlError::new(code, message))?;
        self.send_true_row("pgtier_switchover");
        Ok(())
    }

    fn replication_view(&mut self) -> Result<(), SqlError> {
        let Some(replication) = self.shared.replication.clone() else {
            return Err(SqlError::new("55000", "replication is not configured").with_hint("Set [replication] role."));
        };
        let r = replication.status();
        let values = [
            r.role.to_owned(),
            r.mode.to_owned(),
            if r.connected { "t" } else { "f" }.to_owned(),
            r.standby_durable_lsn.to_string(),
            r.standby_applied_lsn.to_string(),
            r.active_durable_lsn.to_string(),
            r.lag_bytes.to_string(),
            r.lag_ms.to_string(),
            r.lease.state.to_owned(),
            r.lease.epoch.to_string(),
            r.lease.valid_ms.to_string(),
            r.standby_link.to_owned(),
        ];
        let columns = [
            ("role", crate::types::TEXT),
            ("mode", crate::types::TEXT),
            ("connected", crate::types::BOOL),
            ("standby_durable_lsn", crate::types::INT8),
            ("standby_applied_lsn", crate::types::INT8),
            ("active_durable_lsn", crate::types::INT8),
            ("lag_bytes", crate::types::INT8),
            ("lag_ms", crate::types::INT8),
            ("lease", crate::types::TEXT),
            ("lease_epoch", crate::types::INT8),
            ("lease_valid_ms", crate::types::INT8),
            ("standby_link", crate::types::TEXT),
        ];
        let fields = columns
            .iter()
            .map(|(name, oid)| FieldDescription::new((*name).to_owned(), 0, 0, *oid, -1, -1, 0))
            .collect();
        self.wire.send(PgWireBackendMessage::RowDescription(RowDescription::new(fields)));
        let mut row = bytes::BytesMut::new();
        for v in &values {
            bytes::BufMut::put_i32(&mut row, v.len() as i32);
            bytes::BufMut::put_slice(&mut row, v.as_bytes());
        }
        self.wire.send(PgWireBackendMessage::DataRow(DataRow::new(row, values.len() as i16)));
        self.wire.command_complete("SELECT 1");
        Ok(())
    }

    /// pg_reload_conf(): every configured user counts as a superuser.
    /// PostgreSQL answers true once the postmaster is signalled and
    /// reports problems in its log only; here the reload is done before
    /// the answer, so its problems go to the caller as WARNINGs too.
    fn reload_conf(&mut self) {
        match self.shared.reload() {
            Ok(r) => {
                for key in r.restart_needed {
                    let message = format!("{key} changed; it needs a restart, the old value stays in force");
                    self.wire.notice(&SqlError::new("55P02", message), "WARNING");
                }
            }
            Err(e) => {
                let message = format!("configuration not reloaded, the old one stays in force: {e}");
                self.wire.notice(&SqlError::new("F0000", message), "WARNING");
            }
        }
        self.send_true_row("pg_reload_conf");
    }

    /// A one-row, one-column `true` answer named `column` (what pg_promote
    /// and pg_reload_conf return).
    fn send_true_row(&mut self, column: &str) {
        let field = FieldDescription::new(column.to_owned(), 0, 0, crate::types::BOOL, 1, -1, 0);
        self.wire.send(PgWireBackendMessage::RowDescription(RowDescription::new(vec![field])));
        let mut row = bytes::BytesMut::new();
        bytes::BufMut::put_i32(&mut row, 1);
        bytes::BufMut::put_u8(&mut row, b't');
        self.wire.send(PgWireBackendMessage::DataRow(DataRow::new(row, 1)));
        self.wire.command_complete("SELECT 1");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn promote_spellings() {
        for sql in ["SELECT pg_promote()", "select pg_promote(true, 60);", "SELECT pg_catalog.pg_promote( )"] {
            assert!(super::is_promote(sql), "{sql}");
        }
        for sql in ["SELECT pg_promote(), 1", "SELECT 1; SELECT pg_promote()", "SELECT pg_promote(x)"] {
            assert!(!super::is_promote(sql), "{sql}");
        }
    }

    #[test]
    fn reload_conf_spellings() {
        for sql in ["SELECT pg_reload_conf()", "select  pg_reload_conf( ) ;", "SELECT pg_catalog.pg_reload_conf();"] {
            assert!(super::is_reload_conf(sql), "{sql}");
        }
        for sql in ["SELECT pg_reload_conf(), 1", "SELECT 1; SELECT pg_reload_conf()"] {
            assert!(!super::is_reload_conf(sql), "{sql}");
        }
    }
}
