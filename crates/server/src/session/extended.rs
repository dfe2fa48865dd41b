//! The extended query protocol: Parse, Bind, Describe, Execute, Close, and
//! the portals Bind makes (parameters decoded, result formats, the rows of
//! a portal suspended by Execute's row limit).
//!
//! Bind and Execute of a prepared statement are the hot path: Bind is read
//! in place (`wire::BindRef`) and decodes into the portal's reused
//! parameter vector; Execute encodes rows straight from the executor's
//! result buffer (session/encode.rs). Neither allocates per message.
//!
//! Named statements are the Connection's (they share a namespace with SQL
//! PREPARE); the unnamed statement and the portals are protocol state,
//! kept here. What an Execute means for the transaction (the implicit block
//! of a run of Executes up to Sync) the Connection decides; the session
//! only tells it whether the Sync is already in.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use pgtier_engine::Value;
use pgtier_sql::SqlError;
use pgtier_sql::session::{Stmt, StmtKind, Via};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::ParameterDescription;
use pgwire::messages::extendedquery::{Close, Describe, Parse};

use super::Session;
use super::encode::{encode_rows, row_description};
use crate::passthrough::{RawParams, Remote, remote};
use crate::types;
use crate::wire::{BindRef, Codes};

/// Rows of a portal run with a row limit, encoded, waiting for the next
/// Execute.
struct Pending {
    rows: BytesMut,
    ends: Vec<usize>,
    sent: usize,
    tag: String,
}

#[derive(Default)]
pub(super) struct Portal {
    stmt: Option<Arc<Stmt>>,
    params: Vec<Value>,
    /// Result format per column (0 text, 1 binary).
    formats: Vec<i16>,
    pending: Option<Pending>,
    /// A passthrough portal's parameters, as the client sent them.
    raw: RawParams,
}

impl Session {
    pub(super) fn parse(&mut self, m: Parse) -> Result<(), SqlError> {
        let stmt = match self.conn.prepare_stmt(&m.query, &m.type_oids) {
            Ok(s) => s,
            Err(e) => {
                self.error_position = e.position_in(&m.query);
                return Err(e);
            }
        };
        if let Some(r) = stmt.foreign::<Remote>() {
            self.remote_describe(r, &m.type_oids)?;
        }
        match m.name {
            Some(name) => self.conn.define_stmt(name, stmt)?,
            None => self.unnamed_stmt = Some(stmt),
        }
        self.wire.parse_complete();
        Ok(())
    }

    fn find_statement(&self, name: Option<&str>) -> Result<Arc<Stmt>, SqlError> {
        let found = match name {
            None => self.unnamed_stmt.clone(),
            Some(n) => self.conn.named_stmt(n),
        };
        found.ok_or_else(|| {
            SqlError::new("26000", format!("prepared statement \"{}\" does not exist", name.unwrap_or("")))
        })
    }

    pub(super) fn bind(&mut self, m: &BindRef<'_>) -> Result<(), SqlError> {
        let stmt = self.find_statement(m.statement_name.as_deref())?;
        self.conn.check_bindable(&stmt)?;
        let mut portal = match m.portal_name.as_deref() {
            None => std::mem::take(&mut self.unnamed_portal),
            Some(name) if self.portals.contains_key(name) => {
                return Err(SqlError::new("42P03", format!("portal \"{name}\" already exists")));
            }
            Some(_) => Portal::default(),
        };
        // A text parameter 'now' reads the transaction clock, as at
        // PostgreSQL's Bind.
        let result = self.conn.with_transaction_clock(|| fill_portal(&mut portal, &stmt, m));
        portal.stmt = Some(stmt);
        portal.pending = None;
        match &m.portal_name {
            None => self.unnamed_portal = portal,
            Some(name) => {
                if result.is_ok() {
                    self.portals.insert(name.clone().into_owned(), portal);
                }
            }
        }
        result?;
        self.wire.bind_complete();
        Ok(())
    }

    pub(super) fn describe(&mut self, m: &Describe) -> Result<(), SqlError> {
        if m.target_type == b'S' {
            let stmt = self.find_statement(m.name.as_deref())?;
            let oids = match stmt.foreign::<Remote>() {
                Some(r) => r.param_oids(),
                None => (0..stmt.param_types().len().max(stmt.declared().len())).map(|i| param_oid(&stmt, i)).collect(),
            };
            self.wire.send(PgWireBackendMessage::ParameterDescription(ParameterDescription::new(oids)));
            self.describe_rows(&stmt, &[]);
            return Ok(());
        }
        let portal = match m.name.as_deref() {
            None => &self.unnamed_portal,
            Some(n) => {
                self.portals.get(n).ok_or_else(|| SqlError::new("34000", format!("portal \"{n}\" does not exist")))?
            }
        };
        let Some(stmt) = portal.stmt.clone() else {
            return Err(SqlError::new("34000", "portal \"\" does not exist"));
        };
        let formats = portal.formats.clone();
        self.describe_rows(&stmt, &formats);
        Ok(())
    }

    fn describe_rows(&mut self, stmt: &Stmt, formats: &[i16]) {
        if let Some(r) = stmt.foreign::<Remote>() {
            r.describe_rows(&mut self.wire, formats);
            return;
        }
        if !stmt.returns_rows() {
            self.wire.no_data();
            return;
        }
        let info = stmt.result_columns();
        self.wire.send(row_description(info.columns(), formats));
    }

    pub(super) fn execute(&mut self, name: Option<&str>, max_rows: i32) -> Result<(), SqlError> {
        let started = self.statement_started();
        let mut portal = match name {
            None => std::mem::take(&mut self.unnamed_portal),
            Some(n) => self
                .portals
                .remove(n)
                .ok_or_else(|| SqlError::new("34000", format!("portal \"{n}\" does not exist")))?,
        };
        let result = self.execute_portal(&mut portal, max_rows);
        if started.is_some() {
            self.log_execute(started, &portal);
        }
        match name {
            None => self.unnamed_portal = portal,
            Some(n) => {
                self.portals.insert(n.to_owned(), portal);
            }
        }
        result
    }

    fn execute_portal(&mut self, portal: &mut Portal, max_rows: i32) -> Result<(), SqlError> {
        let Some(stmt) = portal.stmt.clone() else {
            return Err(SqlError::new("34000", "portal \"\" does not exist"));
        };
        if let Some(p) = &mut portal.pending {
            self.send_pending(p, max_rows);
            if p.sent == p.ends.len() {
                portal.pending = None;
            }
            return Ok(());
        }
        match stmt.kind() {
            StmtKind::Empty => {
                self.wire.empty_query();
                Ok(())
            }
            StmtKind::Copy(ast) => self.copy(ast, true),
            // A FETCH's columns are its cursor's, which Describe does not
            // know yet: refused before it moves the cursor, rather than
            // rows the client was told would not come (MOVE has none).
            StmtKind::Utility(ast) if matches!(**ast, sqlparser::ast::Statement::Fetch { into: None, .. }) => {
                Err(SqlError::new(
                    "0A000",
                    "FETCH over the extended query protocol is not supported; send it as a simple query",
                ))
            }
            StmtKind::Utility(ast) => self.utility(ast),
            StmtKind::Cache(statement) => self.cache_statement(statement),
            StmtKind::Foreign(_) => self.remote_execute(remote(&stmt)?, portal, max_rows),
            StmtKind::Sql(_) => {
                // Whether the Sync that ends this run is already in: then
                // the Execute is alone in its run.
                let via = Via::Execute { sync_next: self.wire.rbuf.first() == Some(&b'S') };
                if max_rows > 0 && stmt.returns_rows() {
                    let mut pending = self.run_to_pending(&stmt, portal, via)?;
                    self.send_pending(&mut pending, max_rows);
                    if pending.sent < pending.ends.len() {
                        portal.pending = Some(pending);
                    }
                } else {
                    self.run_statement(&stmt, &portal.params, via, Some(&portal.formats))?;
                }
                if stmt.is_set() {
                    self.report_changes();
                }
                Ok(())
            }
        }
    }

    /// `log_min_duration_statement` for an Execute: the statement's text
    /// (its SQL, or the COPY or PREPARE/EXECUTE statement printed back) and
    /// its parameters.
    fn log_execute(&self, started: Option<std::time::Instant>, portal: &Portal) {
        let Some(stmt) = &portal.stmt else { return };
        let printed;
        let text = match stmt.kind() {
            StmtKind::Sql(ps) => ps.sql(),
            StmtKind::Copy(ast) | StmtKind::Utility(ast) => {
                printed = ast.to_string();
                &printed
            }
            StmtKind::Cache(_) => "(cache-group statement)",
            StmtKind::Foreign(_) => "(passthrough statement)",
            StmtKind::Empty => "",
        };
        self.statement_ended(started, text, &portal.params);
    }

    /// Runs a portal whose rows are fetched in pieces (Execute with a row
    /// limit): the rows are encoded once and handed out per Execute.
    fn run_to_pending(&mut self, stmt: &Stmt, portal: &Portal, via: Via) -> Result<Pending, SqlError> {
        self.guard_standby_reads()?;
        let mut rows = BytesMut::new();
        let mut ends = Vec::new();
        let scratch = &mut self.scratch;
        let (tag, ()) = self.conn.execute_stmt(stmt, &portal.params, via, |r| {
            let info = stmt.result_columns();
            encode_rows(&mut rows, r, &portal.formats, info.types(), scratch, Some(&mut ends));
        })?;
        Ok(Pending { rows, ends, sent: 0, tag: tag.to_string() })
    }

    /// Execute of a passthrough portal: all rows are fetched from
    /// PostgreSQL, then handed out per Execute like a local portal's.
    fn remote_execute(&mut self, r: &Remote, portal: &mut Portal, max_rows: i32) -> Result<(), SqlError> {
        let mut backend = self.backend()?;
        let fetched = r.run_extended(backend.lease(), &portal.raw, &portal.formats, &mut self.wire.wbuf);
        self.keep_backend(backend);
        let (rows, ends, tag) = fetched?;
        let mut pending = Pending { rows, ends, sent: 0, tag };
        self.send_pending(&mut pending, max_rows);
        if pending.sent < pending.ends.len() {
            portal.pending = Some(pending);
        }
        Ok(())
    }

    fn send_pending(&mut self, p: &mut Pending, max_rows: i32) {
        let limit = usize::try_from(max_rows).ok().filter(|&n| n > 0).unwrap_or(usize::MAX);
        let from = if p.sent == 0 { 0 } else { p.ends[p.sent - 1] };
        let upto = p.sent.saturating_add(limit).min(p.ends.len());
        let to = if upto == 0 { 0 } else { p.ends[upto - 1] };
        self.wire.wbuf.extend_from_slice(&p.rows[from..to]);
        p.sent = upto;
        if p.sent < p.ends.len() {
            self.wire.portal_suspended();
        } else {
            self.wire.command_complete(&p.tag);
        }
    }

    pub(super) fn close(&mut self, m: &Close) -> Result<(), SqlError> {
        match (m.target_type, m.name.as_deref()) {
            (b'S', None) => self.unnamed_stmt = None,
            (b'S', Some(n)) => self.conn.close_stmt(n),
            (_, None) => self.unnamed_portal = Portal::default(),
            (_, Some(n)) => {
                self.portals.remove(n);
            }
        }
        self.wire.close_complete();
        Ok(())
    }
}

/// The OID ParameterDescription reports for `$i+1`.
fn param_oid(stmt: &Stmt, i: usize) -> u32 {
    match stmt.declared().get(i) {
        Some(&oid) if oid != 0 => oid,
        _ => stmt.param_types().get(i).map_or(types::TEXT, |t| types::oid(*t)),
    }
}

/// Decodes Bind's parameters and result formats into `portal`.
fn fill_portal(portal: &mut Portal, stmt: &Stmt, m: &BindRef<'_>) -> Result<(), SqlError> {
    if let Some(r) = stmt.foreign::<Remote>() {
        // Passthrough keeps the values as sent: owned copies (not the hot path).
        let params: Vec<Option<Bytes>> = m.parameters().map(|p| p.map(Bytes::copy_from_slice)).collect();
        let formats: Vec<i16> = m.parameter_format_codes.iter().collect();
        let ncols = r.bind(&mut portal.raw, &params, &formats, m.statement_name.as_deref().unwrap_or(""))?;
        return expand_formats(m.result_column_format_codes, ncols, &mut portal.formats);
    }
    let n = m.param_count;
    // A client may declare more parameters than the statement uses.
    let needed = stmt.param_types().len().max(stmt.declared().len());
    if n != needed {
        return Err(SqlError::new(
            "08P01",
            format!(
                "bind message supplies {n} parameters, but prepared statement \"{}\" requires {needed}",
                m.statement_name.as_deref().unwrap_or("")
            ),
        ));
    }
    let fcodes = m.parameter_format_codes;
    if !(fcodes.len() <= 1 || fcodes.len() == n) {
        return Err(SqlError::new(
            "08P01",
            format!("bind message has {} parameter formats but {n} parameters", fcodes.len()),
        ));
    }
    portal.params.clear();
    for (i, p) in m.parameters().enumerate() {
        let Some(bytes) = p else {
            portal.params.push(Value::Null);
            continue;
        };
        let format = match fcodes.len() {
            0 => 0,
            1 => fcodes.get(0).unwrap_or(0),
            _ => fcodes.get(i).unwrap_or(0),
        };
        let declared = stmt.declared().get(i).copied().unwrap_or(0);
        let Some(&inferred) = stmt.param_types().get(i) else {
            // Declared but unused: nothing reads it.
            portal.params.push(Value::Null);
            continue;
        };
        portal.params.push(types::decode(bytes, format == 0, declared, inferred, types::Origin::Param(i + 1))?);
    }
    expand_formats(m.result_column_format_codes, stmt.column_count(), &mut portal.formats)
}

/// The formats of `n` columns from a Bind's list (none: all text; one:
/// all alike; else one per column).
fn expand_formats(codes: Codes<'_>, n: usize, out: &mut Vec<i16>) -> Result<(), SqlError> {
    out.clear();
    match codes.len() {
        0 => out.resize(n, 0),
        1 => out.resize(n, codes.get(0).unwrap_or(0)),
        k if k == n => out.extend(codes.iter()),
        k => {
            return Err(SqlError::new(
                "08P01",
                format!("bind message has {k} result formats but query has {n} columns"),
            ));
        }
    }
    if out.iter().any(|&f| f != 0 && f != 1) {
        return Err(SqlError::new("22023", "unsupported format code"));
    }
    Ok(())
}
