//! The embedded engine in direct mode (DESIGN.md §2: "embedded"): the same
//! workload code runs its SQL in-process through `pgtier-sql`'s
//! [`Connection`] on a [`pgtier_engine::Database`] opened in a directory.
//!
//! The hot path converts between the workload's [`Value`] and the engine's
//! values without allocating for integers: parameters are written into a
//! per-session vector whose text slots keep their buffers, and results are
//! read through `Connection::query_with` (no row copies). Text results
//! allocate one `String` each, because [`Session::query`] hands out owned
//! values.
//!
//! Population bypasses SQL: [`Target::bulk_load`] inserts through the
//! engine's typed API in large async-commit transactions (parsing and
//! binding an INSERT per row would cost more than the insert itself).

use std::path::{Path, PathBuf};
use std::time::Instant;

use pgtier_engine::{CommitMode, DataType, Database, EngineConfig, EngineError, TableId, Value as EValue};
use pgtier_sql::{Connection, PreparedStatement, SqlError};

use crate::result::BackendFigures;
use crate::target::{
    BackendSampler, DbError, RowSource, SIMPLE_QUERY_ROWS_MAX, Session, StatementId, Target, TextRow, Value,
    too_many_rows,
};
use crate::targets::postgres::proc_ticks;

/// Rows per bulk-load transaction: large enough that commit cost vanishes,
/// small enough that one WAL record run and the transaction's write set stay
/// a few MB.
const LOAD_ROWS_PER_TXN: u64 = 10_000;

fn sql_error(e: SqlError) -> DbError {
    DbError::new(Some(e.sqlstate), e.message)
}

fn engine_error(e: EngineError) -> DbError {
    DbError::new(Some(e.sqlstate()), e.to_string())
}

/// An engine database in a local directory, driven in-process.
pub struct EmbeddedTarget {
    db: Database,
    dir: PathBuf,
    mode: CommitMode,
}

impl EmbeddedTarget {
    /// Opens (creating or recovering) the database in `dir`; transactions
    /// commit in `mode`.
    pub fn open(dir: &Path, mode: CommitMode) -> Result<EmbeddedTarget, DbError> {
        std::fs::create_dir_all(dir).map_err(|e| DbError::new(None, format!("creating {}: {e}", dir.display())))?;
        let db = Database::open(dir, engine_config(mode)).map_err(engine_error)?;
        Ok(EmbeddedTarget { db, dir: dir.to_path_buf(), mode })
    }

    /// Drives a database opened elsewhere (e.g. under a `pgtier_cache::Cache`
    /// whose groups were loaded from PostgreSQL); `dir` is where it lives,
    /// for the report. Open it with [`engine_config`] so a run over it is
    /// comparable with one over [`EmbeddedTarget::open`].
    pub fn from_database(db: Database, dir: &Path, mode: CommitMode) -> EmbeddedTarget {
        EmbeddedTarget { db, dir: dir.to_path_buf(), mode }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    pub fn commit_mode(&self) -> CommitMode {
        self.mode
    }
}

/// The engine settings every embedded run uses: commits in `mode`.
/// Recovery measurements ("checkpoint + N s of WAL") need the periodic
/// checkpoints off: PGTIER_CHECKPOINT_WAL_MB=0 turns them off, another
/// number sets the WAL volume between checkpoints.
pub fn engine_config(mode: CommitMode) -> EngineConfig {
    let mut config = EngineConfig { commit_mode: mode, ..EngineConfig::default() };
    if let Some(mb) = std::env::var("PGTIER_CHECKPOINT_WAL_MB").ok().and_then(|v| v.parse::<u64>().ok()) {
        if mb == 0 {
            config.checkpoint_wal_bytes = u64::MAX;
            config.checkpoint_interval = None;
        } else {
            config.checkpoint_wal_bytes = mb << 20;
        }
    }
    config
}

fn mode_name(mode: CommitMode) -> &'static str {
    match mode {
        CommitMode::Sync => "sync",
        CommitMode::Async => "async",
    }
}

/// CHECKPOINT is not SQL the engine's SQL layer plans (it is a utility
/// command); the target runs it on the engine directly.
fn is_checkpoint(statement: &str) -> bool {
    statement.trim().trim_end_matches(';').trim().eq_ignore_ascii_case("checkpoint")
}

impl Target for EmbeddedTarget {
    fn describe(&self) -> String {
        format!("embedded:{} (pgtier engine, direct mode, {} commit)", self.dir.display(), mode_name(self.mode))
    }

    fn connect(&self) -> Result<Box<dyn Session>, DbError> {
        Ok(Box::new(EmbeddedSession {
            conn: Connection::new(self.db.clone()),
            statements: Vec::new(),
            params: Vec::with_capacity(8),
        }))
    }

    fn execute_batch(&self, sql: &str) -> Result<(), DbError> {
        if is_checkpoint(sql) {
            return self.db.checkpoint().map(|_| ()).map_err(engine_error);
        }
        let mut conn = Connection::new(self.db.clone());
        conn.execute_sql(sql).map(|_| ()).map_err(sql_error)
    }

    fn bulk_load(&self, table: &str, columns: &[&str], rows: &mut dyn RowSource) -> Result<u64, DbError> {
        let catalog = self.db.catalog();
        let schema = catalog
            .table_by_name(table)
            .ok_or_else(|| DbError::new(Some("42P01"), format!("relation \"{table}\" does not exist")))?;
        let positions = columns
            .iter()
            .map(|c| {
                schema.column_index(c).ok_or_else(|| {
                    DbError::new(Some("42703"), format!("column \"{c}\" of relation \"{table}\" does not exist"))
                })
            })
            .collect::<Result<Vec<usize>, DbError>>()?;
        let types: Vec<DataType> = schema.columns.iter().map(|c| c.ty).collect();
        let id: TableId = schema.id;
        let mut full = schema.default_row();
        let defaults = full.clone();
        let mut row = Vec::with_capacity(columns.len());
        let mut loaded = 0u64;
        // Population is re-runnable from scratch, so it never waits for an
        // fsync per transaction; the final checkpoint makes it durable.
        let mut txn = self.db.begin_with(CommitMode::Async).map_err(engine_error)?;
        let mut in_txn = 0u64;
        loop {
            row.clear();
            if !rows.next_row(&mut row) {
                break;
            }
            full.clone_from(&defaults);
            for (v, &pos) in row.drain(..).zip(&positions) {
                full[pos] = to_engine(v, types[pos]).map_err(sql_error)?;
            }
            txn.insert(id, &full).map_err(engine_error)?;
            loaded += 1;
            in_txn += 1;
            if in_txn == LOAD_ROWS_PER_TXN {
                txn.commit().map_err(engine_error)?;
                txn = self.db.begin_with(CommitMode::Async).map_err(engine_error)?;
                in_txn = 0;
            }
        }
        txn.commit().map_err(engine_error)?;
        Ok(loaded)
    }

    fn sampler(&self) -> Option<Box<dyn BackendSampler>> {
        Some(Box::new(EngineSampler { db: self.db.clone(), running: None }))
    }

    fn durability(&self) -> Result<String, DbError> {
        Ok(match self.mode {
            CommitMode::Sync => "commit_mode=sync (acknowledged after WAL fdatasync, group commit)".to_owned(),
            CommitMode::Async => {
                "commit_mode=async (acknowledged when in the WAL buffer; flushed within 10 ms)".to_owned()
            }
        })
    }

    fn analytic_route(&self) -> Option<crate::target::AnalyticRoute> {
        // None without copies running: nothing to report.
        let conn = Connection::new(self.db.clone());
        let (upkeep, delta_rows) = conn.analytics_upkeep()?;
        let (columnar, fallbacks) = conn.columnar_statements();
        Some(crate::target::AnalyticRoute {
            columnar,
            fallbacks,
            last_fallback: conn.columnar_last_fallback(),
            catch_up_waits: upkeep.waits,
            catch_up_wait_ms: upkeep.wait_total_us as f64 / 1000.0,
            merges: upkeep.merges,
            merged_rows: upkeep.merged_rows,
            merge_ms: upkeep.merge_total_us as f64 / 1000.0,
            scans: upkeep.scans,
            scan_ms: upkeep.scan_total_us as f64 / 1000.0,
            delta_rows,
        })
    }

    fn bulk_load_method(&self) -> &'static str {
        "engine insert (typed API, no SQL)"
    }

    fn keys_with_tables(&self) -> bool {
        // The engine stores rows by primary key and has no ALTER TABLE.
        true
    }
}

/// The workload's value as the engine value of a column type. Integers
/// that do not fit the narrower type stay Int8 so the SQL layer raises
/// PostgreSQL's out-of-range error instead of wrapping. Text goes through
/// the column type's input function (as COPY text would): numeric and date
/// columns get typed values, char(n) its blank padding, varchar(n) its
/// length check.
fn to_engine(v: Value, ty: DataType) -> Result<EValue, SqlError> {
    Ok(match v {
        Value::Null => EValue::Null,
        Value::Int(i) => int_value(i, ty),
        Value::Text(s) if ty == DataType::Text => EValue::Text(s),
        Value::Text(s) => pgtier_sql::value::parse_input(&s, ty)?,
    })
}

fn int_value(i: i64, ty: DataType) -> EValue {
    match ty {
        DataType::Int2 => i16::try_from(i).map_or(EValue::Int8(i), EValue::Int2),
        DataType::Int4 => i32::try_from(i).map_or(EValue::Int8(i), EValue::Int4),
        _ => EValue::Int8(i),
    }
}

/// Writes `v` into `slot`, reusing the slot's text buffer. Text for a
/// parameter of another type (numeric, timestamp: TPC-C's money and
/// dates) goes through the type's input function, as the server's text
/// parameter format would; an integer for a numeric becomes that numeric.
fn set_param(slot: &mut EValue, v: &Value, ty: DataType) -> Result<(), DbError> {
    match v {
        Value::Null => *slot = EValue::Null,
        Value::Int(i) if matches!(ty, DataType::Numeric { .. }) => {
            *slot = pgtier_sql::value::parse_input(&i.to_string(), ty).map_err(sql_error)?;
        }
        Value::Int(i) => *slot = int_value(*i, ty),
        Value::Text(s) if param_parses(ty) => {
            *slot = pgtier_sql::value::parse_input(s, ty).map_err(sql_error)?;
        }
        Value::Text(s) => {
            if let EValue::Text(buf) = slot {
                buf.clear();
                buf.push_str(s);
            } else {
                *slot = EValue::Text(s.clone());
            }
        }
    }
    Ok(())
}

/// Types whose text parameters [`set_param`] converts before binding; the
/// rest (an unresolved parameter planned as text, say) are left as text
/// for the SQL layer to cast as it always did.
fn param_parses(ty: DataType) -> bool {
    matches!(ty, DataType::Numeric { .. } | DataType::Timestamp(_) | DataType::TimestampTz(_) | DataType::Date)
}

/// [`from_engine`] into an existing slot, reusing its string buffer.
fn assign_from_engine(slot: &mut Value, v: &EValue) {
    if let (Value::Text(s), EValue::Text(t)) = (&mut *slot, v) {
        s.clone_from(t);
        return;
    }
    *slot = from_engine(v);
}

fn from_engine(v: &EValue) -> Value {
    match v {
        EValue::Null => Value::Null,
        EValue::Int2(i) => Value::Int(i64::from(*i)),
        EValue::Int4(i) => Value::Int(i64::from(*i)),
        EValue::Int8(i) => Value::Int(*i),
        EValue::Bool(b) => Value::Int(i64::from(*b)),
        EValue::Text(s) => Value::Text(s.clone()),
        // The workloads read integers and text only; anything else is shown
        // in PostgreSQL's text form so a mismatch is visible, not silent.
        other => Value::Text(pgtier_sql::value::to_text(other)),
    }
}

struct Prepared {
    stmt: PreparedStatement,
    /// Parameter types from planning; `$n` values are converted to them.
    param_types: Vec<DataType>,
}

pub struct EmbeddedSession {
    conn: Connection,
    statements: Vec<Prepared>,
    /// Reused parameter vector (text slots keep their buffers).
    params: Vec<EValue>,
}

impl EmbeddedSession {
    fn bind(&mut self, stmt: StatementId, params: &[Value]) -> Result<&Prepared, DbError> {
        let p = self
            .statements
            .get(stmt)
            .ok_or_else(|| DbError::new(None, format!("statement {stmt} was not prepared on this session")))?;
        self.params.truncate(params.len());
        while self.params.len() < params.len() {
            self.params.push(EValue::Null);
        }
        for (i, (slot, v)) in self.params.iter_mut().zip(params).enumerate() {
            set_param(slot, v, p.param_types.get(i).copied().unwrap_or(DataType::Int8))?;
        }
        Ok(p)
    }
}

impl Session for EmbeddedSession {
    fn prepare(&mut self, sql: &str) -> Result<StatementId, DbError> {
        let stmt = self.conn.prepare(sql).map_err(sql_error)?;
        let param_types = stmt.param_types();
        self.statements.push(Prepared { stmt, param_types });
        Ok(self.statements.len() - 1)
    }

    fn query(&mut self, stmt: StatementId, params: &[Value], out: &mut Vec<Value>) -> Result<usize, DbError> {
        self.bind(stmt, params)?;
        let Some(p) = self.statements.get(stmt) else { return Ok(0) };
        self.conn
            .query_with(&p.stmt, &self.params, |values, width| {
                // Overwrite in place: a text slot keeps its buffer.
                out.truncate(values.len());
                for (slot, v) in out.iter_mut().zip(values) {
                    assign_from_engine(slot, v);
                }
                let kept = out.len();
                out.extend(values[kept..].iter().map(from_engine));
                values.len().checked_div(width).unwrap_or(0)
            })
            .map_err(sql_error)
    }

    fn execute(&mut self, stmt: StatementId, params: &[Value]) -> Result<u64, DbError> {
        self.bind(stmt, params)?;
        let Some(p) = self.statements.get(stmt) else { return Ok(0) };
        self.conn.execute(&p.stmt, &self.params).map_err(sql_error)
    }

    fn simple_query(&mut self, sql: &str) -> Result<Vec<TextRow>, DbError> {
        let result = self.conn.execute_sql(sql).map_err(sql_error)?;
        let Some(rows) = result.rows else { return Ok(Vec::new()) };
        if rows.len() > SIMPLE_QUERY_ROWS_MAX {
            return Err(too_many_rows());
        }
        // Row::text is the server's text output (value::to_text), so the
        // embedded answer reads exactly as the same query over the wire.
        Ok(rows.iter().map(|row| (0..row.len()).map(|i| row.text(i)).collect()).collect())
    }

    fn begin(&mut self) -> Result<(), DbError> {
        self.conn.begin().map_err(sql_error)
    }

    fn commit(&mut self) -> Result<(), DbError> {
        self.conn.commit().map_err(sql_error)
    }

    fn rollback(&mut self) -> Result<(), DbError> {
        self.conn.rollback().map_err(sql_error)
    }
}

struct EngineCounters {
    commits: u64,
    wal_bytes: u64,
    fsyncs: u64,
    cpu_ticks: u64,
}

fn counters(db: &Database) -> EngineCounters {
    let stats = db.stats();
    EngineCounters {
        commits: stats.commits,
        wal_bytes: stats.wal.bytes_appended,
        fsyncs: stats.wal.fsyncs,
        cpu_ticks: proc_ticks(std::process::id()).map_or(0, |t| t.own),
    }
}

struct Running {
    started: Instant,
    start: EngineCounters,
}

/// Engine figures over the measure window: commits, WAL bytes, fsyncs and
/// commits per fsync, CPU of this process (workload threads included: in
/// direct mode the application *is* the database process). Counters are
/// read at the window's ends only, so sampling costs the workload nothing.
pub struct EngineSampler {
    db: Database,
    running: Option<Running>,
}

impl BackendSampler for EngineSampler {
    fn start(&mut self) -> Result<(), DbError> {
        if self.running.is_some() {
            return Err(DbError::new(None, "sampler already running"));
        }
        self.running = Some(Running { started: Instant::now(), start: counters(&self.db) });
        Ok(())
    }

    fn finish(&mut self) -> Result<BackendFigures, DbError> {
        let running = self.running.take().ok_or_else(|| DbError::new(None, "sampler was not started"))?;
        let window_s = running.started.elapsed().as_secs_f64();
        let end = counters(&self.db);
        let commits = end.commits.saturating_sub(running.start.commits);
        let wal_bytes = end.wal_bytes.saturating_sub(running.start.wal_bytes);
        let fsyncs = end.fsyncs.saturating_sub(running.start.fsyncs);
        let per_fsync = if fsyncs == 0 { 0.0 } else { commits as f64 / fsyncs as f64 };
        let cpu_ticks = end.cpu_ticks.saturating_sub(running.start.cpu_ticks);
        Ok(BackendFigures {
            // BackendFigures has no fsync fields (PostgreSQL does not expose
            // them per window); they ride in the source text.
            source: format!("pgtier engine; {fsyncs} WAL fsyncs, {per_fsync:.1} commits/fsync"),
            window_s,
            commits,
            commits_per_s: commits as f64 / window_s,
            wal_bytes,
            wal_bytes_per_s: wal_bytes as f64 / window_s,
            // No wait-event sampling in the engine: committers that wait for
            // an fsync are visible as commits/fsync instead.
            wal_wait_share: 0.0,
            cpu_percent: Some(100.0 * cpu_ticks as f64 / crate::cpu::clock_ticks_per_s() / window_s),
            samples: 0,
            active_sessions: 0.0,
            wal_wait_sessions: 0.0,
            process_cpu: Vec::new(),
        })
    }
}
