//! A session's statements: [`PreparedStatement`], a statement with its plan
//! (what the embedded API hands out), and [`Stmt`], what the wire
//! protocol's Parse and SQL `PREPARE` name, cache and bind portals to: a
//! plan, or a statement the connection or the server runs by other means.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};
use pgtier_engine::DataType;
use sqlparser::ast::Statement;

use super::Column;
use crate::plan::{Plan, Prepared};

/// A parsed statement with its plan. Planned once; re-planned only when a
/// table it uses changed (DDL), so executions skip parse/bind/plan.
pub struct PreparedStatement {
    /// Unique in the process (never 0): which parked result buffer is its.
    pub(super) id: u64,
    sql: String,
    pub(super) ast: Option<Statement>,
    pub(super) prepared: Mutex<Arc<Prepared>>,
}

static NEXT_STATEMENT_ID: AtomicU64 = AtomicU64::new(1);

impl PreparedStatement {
    pub(super) fn new(sql: String, ast: Option<Statement>, prepared: Prepared) -> PreparedStatement {
        PreparedStatement {
            id: NEXT_STATEMENT_ID.fetch_add(1, Ordering::Relaxed),
            sql,
            ast,
            prepared: Mutex::new(Arc::new(prepared)),
        }
    }
}

impl std::fmt::Debug for PreparedStatement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedStatement").field("sql", &self.sql).finish()
    }
}

impl PreparedStatement {
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// Result columns (empty for statements without RETURNING).
    pub fn columns(&self) -> Vec<Column> {
        self.prepared.lock().columns().to_vec()
    }

    /// Resolved parameter types (`$1` first).
    pub fn param_types(&self) -> Vec<DataType> {
        self.prepared.lock().param_types.clone()
    }

    /// The columns of the rows this statement returns (SELECT, RETURNING,
    /// SHOW); empty when it returns none.
    pub fn result_columns(&self) -> Vec<Column> {
        let p = self.prepared.lock();
        match &p.plan {
            // PostgreSQL names the column after the setting as it spells it (`TimeZone`).
            Plan::Show { name } => {
                let key = match name.as_str() {
                    "time zone" => "timezone",
                    "transaction isolation level" => "transaction_isolation",
                    other => other,
                };
                vec![Column { name: crate::settings::setting_display_name(key).to_owned(), ty: Some(DataType::Text) }]
            }
            _ => p.columns().to_vec(),
        }
    }

    /// Identity of the current plan; changes when the statement is
    /// re-planned (DDL on a table it uses), so callers can tell when what
    /// they derived from the plan (result columns) must be read again.
    pub fn plan_id(&self) -> usize {
        Arc::as_ptr(&*self.prepared.lock()) as usize
    }

    /// True when execution answers with rows (RowDescription + DataRow).
    pub fn returns_rows(&self) -> bool {
        let p = self.prepared.lock();
        matches!(p.plan, Plan::Select(_) | Plan::Show { .. }) || !p.columns().is_empty()
    }
}

/// What a [`Stmt`] is, as far as running it goes.
pub enum StmtKind {
    /// Planned: [`Connection::execute_stmt`](super::Connection::execute_stmt) runs it.
    Sql(Box<PreparedStatement>),
    /// SQL-level PREPARE, EXECUTE or DEALLOCATE: they name the session's
    /// statements, so [`Connection::utility`](super::Connection::utility)
    /// runs them.
    Utility(Box<Statement>),
    /// COPY: the protocol layer runs its sub-protocol.
    Copy(Box<Statement>),
    /// A statement the binder refused that the installed
    /// [`Fallback`](super::Fallback) took over (the server's passthrough);
    /// opaque here, the server runs it.
    Foreign(Box<dyn Any + Send + Sync>),
    /// A cache-group statement (CREATE/DROP/LOAD/UNLOAD/REFRESH CACHE
    /// GROUP): [`Connection::execute_cache`](super::Connection::execute_cache) runs it.
    Cache(Box<pgtier_cache::CacheStatement>),
    /// An empty query string.
    Empty,
}

/// Transaction control, as the block logic needs to know it before a
/// statement runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxnKind {
    None,
    Begin,
    /// COMMIT (true) / ROLLBACK (false): end the block.
    End(bool),
    /// ROLLBACK TO a savepoint: inside a block, and the one statement
    /// besides COMMIT and ROLLBACK a failed block accepts.
    RollbackTo,
}

impl TxnKind {
    /// Accepted in a failed block (25P02 for anything else).
    pub(crate) fn accepted_when_failed(self) -> bool {
        matches!(self, TxnKind::End(_) | TxnKind::RollbackTo)
    }
}

/// The transaction-control kind of `stmt`, and whether it is a SET.
pub(crate) fn classify(stmt: &Statement) -> (TxnKind, bool) {
    match stmt {
        Statement::StartTransaction { .. } => (TxnKind::Begin, false),
        Statement::Commit { .. } => (TxnKind::End(true), false),
        Statement::Rollback { savepoint: Some(_), .. } => (TxnKind::RollbackTo, false),
        Statement::Rollback { .. } => (TxnKind::End(false), false),
        Statement::Set(_) => (TxnKind::None, true),
        _ => (TxnKind::None, false),
    }
}

/// Result columns as last read, and the plan they were read from.
pub struct ResultColumns {
    plan_id: usize,
    columns: Vec<Column>,
    types: Vec<Option<DataType>>,
}

impl ResultColumns {
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Each column's type (None: text, for columns whose type pgtier does
    /// not model).
    pub fn types(&self) -> &[Option<DataType>] {
        &self.types
    }
}

/// A statement of the session: named (Parse with a name, SQL PREPARE),
/// unnamed, or cached by its text. Shared (`Arc`) by those and by the
/// portals bound to it.
pub struct Stmt {
    kind: StmtKind,
    /// Parameter OIDs the client declared (Parse, PREPARE's type list; 0:
    /// infer).
    declared: Vec<u32>,
    param_types: Vec<DataType>,
    returns_rows: bool,
    pub(super) txn: TxnKind,
    is_set: bool,
    /// Behind a lock only so a session can move between threads; one
    /// thread at a time uses it.
    columns: Mutex<ResultColumns>,
}

impl Stmt {
    pub(super) fn new(kind: StmtKind, declared: Vec<u32>, txn: TxnKind, is_set: bool) -> Stmt {
        let (param_types, returns_rows, info) = match &kind {
            StmtKind::Sql(ps) => {
                let columns = ps.result_columns();
                let types = columns.iter().map(|c| c.ty).collect();
                (ps.param_types(), ps.returns_rows(), ResultColumns { plan_id: ps.plan_id(), columns, types })
            }
            _ => (Vec::new(), false, ResultColumns { plan_id: 0, columns: Vec::new(), types: Vec::new() }),
        };
        Stmt { kind, declared, param_types, returns_rows, txn, is_set, columns: Mutex::new(info) }
    }

    pub fn kind(&self) -> &StmtKind {
        &self.kind
    }

    /// The foreign statement of a [`StmtKind::Foreign`], if it is a `T`.
    pub fn foreign<T: Any>(&self) -> Option<&T> {
        match &self.kind {
            StmtKind::Foreign(f) => f.downcast_ref::<T>(),
            _ => None,
        }
    }

    /// Parameter OIDs as declared (0: not declared).
    pub fn declared(&self) -> &[u32] {
        &self.declared
    }

    /// Parameter types as planned (`$1` first).
    pub fn param_types(&self) -> &[DataType] {
        &self.param_types
    }

    /// True when running it answers with rows (RowDescription + DataRow).
    pub fn returns_rows(&self) -> bool {
        self.returns_rows
    }

    /// A SET: settings the server reports may have changed.
    pub fn is_set(&self) -> bool {
        self.is_set
    }

    /// The result columns, re-read first when the statement was re-planned
    /// (DDL on a table it uses).
    pub fn result_columns(&self) -> MutexGuard<'_, ResultColumns> {
        let mut info = self.columns.lock();
        if let StmtKind::Sql(ps) = &self.kind {
            let id = ps.plan_id();
            if info.plan_id != id {
                info.columns = ps.result_columns();
                info.types = info.columns.iter().map(|c| c.ty).collect();
                info.plan_id = id;
            }
        }
        info
    }

    /// The number of result columns as last read (not re-read).
    pub fn column_count(&self) -> usize {
        self.columns.lock().columns.len()
    }
}
