//! PostgreSQL as a benchmark target, through the sync `postgres` client:
//! prepared statements, explicit transactions, COPY for population, and a
//! sampler of server-side figures (commits, WAL, WAL waits, CPU).

use std::error::Error as StdError;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use postgres::config::Host;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{FromSql, IsNull, ToSql, Type};
use postgres::{Client, Statement};

use pgtier_backend::connect::{ConnectError, connect, redact_url};

use super::pgwire::WireSession;
use crate::result::BackendFigures;
use crate::target::{
    BackendSampler, DbError, RowSource, SIMPLE_QUERY_ROWS_MAX, Session, StatementId, Target, TextRow, Value,
    too_many_rows,
};

/// Statements a session may prepare; TATP needs 10. Bounds the per-session
/// statement list so a workload bug cannot grow it without limit.
const STATEMENTS_PER_SESSION_MAX: usize = 256;
/// Most parameters one statement may take (TATP: 5).
const PARAMS_MAX: usize = 16;
/// COPY data is handed to the client library in pieces of about this size.
const COPY_BUFFER_BYTES: usize = 256 * 1024;
/// Wait-event sampling period (the brief: ~10 ms).
const SAMPLE_PERIOD: Duration = Duration::from_millis(10);
/// How often the sampler re-reads the list of server processes for CPU.
const PID_REFRESH_PERIOD: Duration = Duration::from_secs(1);

/// Converts a client error to the workload-facing error, keeping SQLSTATE.
pub fn db_error(e: &postgres::Error) -> DbError {
    match e.as_db_error() {
        Some(db) => {
            let mut message = db.message().to_owned();
            if let Some(detail) = db.detail() {
                message.push_str(": ");
                message.push_str(detail);
            }
            DbError::new(Some(db.code().code()), message)
        }
        None => {
            let mut message = e.to_string();
            let mut source = e.source();
            while let Some(s) = source {
                message.push_str(": ");
                message.push_str(&s.to_string());
                source = s.source();
            }
            DbError::new(e.code().map(|c| c.code()), message)
        }
    }
}

fn connect_error(e: &ConnectError) -> DbError {
    DbError::new(Some(e.sqlstate()), e.to_string())
}

/// How population data is sent with COPY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyFormat {
    Text,
    Binary,
}

/// Which client library the measured sessions use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// [`super::pgwire`]: blocking, two system calls per round trip (default).
    Native,
    /// The `postgres` crate (Tokio underneath); kept to cross-check the
    /// native client's numbers.
    PostgresCrate,
}

/// A PostgreSQL server reached by URL.
pub struct PgTarget {
    url: String,
    shown: String,
    copy_format: CopyFormat,
    client: ClientKind,
    /// The server runs on this host (Unix socket or loopback), so its
    /// processes' CPU can be read from /proc.
    local: bool,
    /// The server is pgtier's (server_version says so): tables are created
    /// with their keys (no ALTER TABLE) and PostgreSQL-only settings,
    /// statistics views and the backend sampler are skipped.
    pgtier: bool,
}

impl PgTarget {
    /// Connects once to check that the server is reachable and the
    /// credentials work, so a bad URL fails with one clear line up front.
    pub fn open(url: &str) -> Result<PgTarget, ConnectError> {
        let mut client = connect(url)?;
        let pgtier = Self::show(&mut client, "server_version").is_ok_and(|v| v.contains("pgtier"));
        drop(client);
        let local = url_is_local(url);
        Ok(PgTarget {
            url: url.to_owned(),
            shown: redact_url(url),
            copy_format: CopyFormat::Binary,
            client: ClientKind::Native,
            local,
            pgtier,
        })
    }

    pub fn with_client(mut self, client: ClientKind) -> PgTarget {
        self.client = client;
        self
    }

    pub fn client_kind(&self) -> ClientKind {
        self.client
    }

    pub fn with_copy_format(mut self, format: CopyFormat) -> PgTarget {
        self.copy_format = format;
        self
    }

    pub fn copy_format(&self) -> CopyFormat {
        self.copy_format
    }

    /// The server is pgtier's, not PostgreSQL (its server_version says so).
    pub fn is_pgtier(&self) -> bool {
        self.pgtier
    }

    fn client(&self) -> Result<Client, DbError> {
        connect(&self.url).map_err(|e| connect_error(&e))
    }

    /// `SHOW` of one setting.
    fn show(client: &mut Client, setting: &str) -> Result<String, DbError> {
        let row = client.query_one(&format!("SHOW {setting}"), &[]).map_err(|e| db_error(&e))?;
        row.try_get::<_, String>(0).map_err(|e| db_error(&e))
    }

    /// Server version and the settings a reader needs to judge the numbers.
    pub fn server_settings(&self) -> Result<Vec<(String, String)>, DbError> {
        let mut client = self.client()?;
        if self.pgtier {
            let names = ["server_version", "synchronous_commit", "default_transaction_isolation"];
            return names.iter().map(|n| Ok(((*n).to_owned(), Self::show(&mut client, n)?))).collect();
        }
        let names = [
            "server_version",
            "fsync",
            "synchronous_commit",
            "wal_sync_method",
            "full_page_writes",
            "default_transaction_isolation",
            "shared_buffers",
            "max_wal_size",
            "wal_level",
        ];
        names.iter().map(|n| Ok(((*n).to_owned(), Self::show(&mut client, n)?))).collect()
    }
}

/// True for Unix-socket and loopback hosts; with several hosts, all must be.
pub fn url_is_local(url: &str) -> bool {
    let Ok(config) = url.parse::<postgres::Config>() else { return false };
    let hosts = config.get_hosts();
    // No host at all means libpq's default: the local Unix socket.
    hosts.iter().all(|h| match h {
        Host::Unix(_) => true,
        Host::Tcp(name) => name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()),
    }) && config.get_hostaddrs().iter().all(|ip| ip.is_loopback())
}

impl Target for PgTarget {
    fn describe(&self) -> String {
        if self.pgtier {
            return format!("pgtier server {}", self.shown);
        }
        format!("postgresql {}", self.shown)
    }

    fn keys_with_tables(&self) -> bool {
        // pgtier's engine keys rows by primary key at CREATE TABLE and has
        // no ALTER TABLE ADD PRIMARY KEY / FOREIGN KEY.
        self.pgtier
    }

    fn connect(&self) -> Result<Box<dyn Session>, DbError> {
        match self.client {
            ClientKind::Native => Ok(Box::new(WireSession::connect(&self.url)?)),
            ClientKind::PostgresCrate => Ok(Box::new(PgSession { client: self.client()?, statements: Vec::new() })),
        }
    }

    fn execute_batch(&self, sql: &str) -> Result<(), DbError> {
        let mut client = self.client()?;
        // Index builds run side by side (see tatp::schema::BUILD_STEPS): give
        // each enough memory to sort in memory, and leave the cores to the
        // parallel statements rather than to parallel workers of one.
        if !self.pgtier {
            client
                .batch_execute("SET maintenance_work_mem = '512MB'; SET max_parallel_maintenance_workers = 0")
                .map_err(|e| db_error(&e))?;
        }
        client.batch_execute(sql).map_err(|e| db_error(&e))
    }

    fn bulk_load(&self, table: &str, columns: &[&str], rows: &mut dyn RowSource) -> Result<u64, DbError> {
        let mut client = self.client()?;
        // Nothing waits on these commits; the data is made durable by the
        // checkpoint that ends population.
        client.batch_execute("SET synchronous_commit = off").map_err(|e| db_error(&e))?;
        let column_list = columns.join(", ");
        match self.copy_format {
            CopyFormat::Text => copy_text(&mut client, table, &column_list, columns.len(), rows),
            CopyFormat::Binary => copy_binary(&mut client, table, &column_list, rows),
        }
    }

    fn sampler(&self) -> Option<Box<dyn BackendSampler>> {
        // PgSampler reads PostgreSQL's statistics views and processes.
        if self.pgtier {
            return None;
        }
        Some(Box::new(PgSampler::new(self.url.clone(), self.local)))
    }

    fn durability(&self) -> Result<String, DbError> {
        let mut client = self.client()?;
        if self.pgtier {
            // The server reports its commit mode as synchronous_commit
            // (on = sync: acknowledged after the WAL fsync).
            return Ok(format!("pgtier server, synchronous_commit={}", Self::show(&mut client, "synchronous_commit")?));
        }
        let mut parts = Vec::new();
        for name in ["fsync", "synchronous_commit", "wal_sync_method", "full_page_writes"] {
            parts.push(format!("{name}={}", Self::show(&mut client, name)?));
        }
        Ok(parts.join(", "))
    }
}

fn copy_text(
    client: &mut Client,
    table: &str,
    column_list: &str,
    width: usize,
    rows: &mut dyn RowSource,
) -> Result<u64, DbError> {
    let mut writer = client.copy_in(&format!("COPY {table} ({column_list}) FROM STDIN")).map_err(|e| db_error(&e))?;
    let mut buf: Vec<u8> = Vec::with_capacity(COPY_BUFFER_BYTES + 4096);
    let mut row = Vec::with_capacity(width);
    let io = |e: std::io::Error| DbError::new(None, format!("COPY {table}: {e}"));
    loop {
        row.clear();
        if !rows.next_row(&mut row) {
            break;
        }
        for (i, v) in row.iter().enumerate() {
            if i > 0 {
                buf.push(b'\t');
            }
            encode_text(&mut buf, v);
        }
        buf.push(b'\n');
        if buf.len() >= COPY_BUFFER_BYTES {
            writer.write_all(&buf).map_err(io)?;
            buf.clear();
        }
    }
    writer.write_all(&buf).map_err(io)?;
    writer.finish().map_err(|e| db_error(&e))
}

/// COPY text format: `\N` for NULL, backslash escapes for the characters
/// that delimit rows and columns.
fn encode_text(buf: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => buf.extend_from_slice(b"\\N"),
        Value::Int(i) => {
            let _ = write!(buf, "{i}");
        }
        Value::Text(s) => {
            for &b in s.as_bytes() {
                match b {
                    b'\\' => buf.extend_from_slice(b"\\\\"),
                    b'\t' => buf.extend_from_slice(b"\\t"),
                    b'\n' => buf.extend_from_slice(b"\\n"),
                    b'\r' => buf.extend_from_slice(b"\\r"),
                    _ => buf.push(b),
                }
            }
        }
    }
}

fn copy_binary(client: &mut Client, table: &str, column_list: &str, rows: &mut dyn RowSource) -> Result<u64, DbError> {
    // The binary format carries no types; learn them from the table.
    let probe = client.prepare(&format!("SELECT {column_list} FROM {table} LIMIT 0")).map_err(|e| db_error(&e))?;
    let types: Vec<Type> = probe.columns().iter().map(|c| c.type_().clone()).collect();
    let field_count = i16::try_from(types.len())
        .map_err(|_| DbError::new(None, format!("COPY {table}: too many columns ({})", types.len())))?;
    let mut writer = client
        .copy_in(&format!("COPY {table} ({column_list}) FROM STDIN (FORMAT binary)"))
        .map_err(|e| db_error(&e))?;
    let io = |e: std::io::Error| DbError::new(None, format!("COPY {table}: {e}"));
    let mut buf = BytesMut::with_capacity(COPY_BUFFER_BYTES + 4096);
    // Signature, flags, header extension length.
    buf.put_slice(b"PGCOPY\n\xff\r\n\0");
    buf.put_i32(0);
    buf.put_i32(0);
    let mut row = Vec::with_capacity(types.len());
    loop {
        row.clear();
        if !rows.next_row(&mut row) {
            break;
        }
        if row.len() != types.len() {
            return Err(DbError::new(
                None,
                format!("COPY {table}: row has {} values for {} columns", row.len(), types.len()),
            ));
        }
        buf.put_i16(field_count);
        for (v, ty) in row.iter().zip(&types) {
            encode_binary(&mut buf, v, ty).map_err(|e| DbError::new(None, format!("COPY {table}: {e}")))?;
        }
        if buf.len() >= COPY_BUFFER_BYTES {
            writer.write_all(&buf).map_err(io)?;
            buf.clear();
        }
    }
    buf.put_i16(-1);
    writer.write_all(&buf).map_err(io)?;
    writer.finish().map_err(|e| db_error(&e))
}

fn encode_binary(buf: &mut BytesMut, v: &Value, ty: &Type) -> Result<(), Box<dyn StdError + Sync + Send>> {
    if matches!(v, Value::Null) {
        buf.put_i32(-1);
        return Ok(());
    }
    // Length placeholder, patched once the value is written.
    let at = buf.len();
    buf.put_i32(0);
    v.to_sql(ty, buf)?;
    let len = i32::try_from(buf.len() - at - 4)?;
    buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Converts by the server's declared parameter type, so a workload can pass
/// `Value::Int` to smallint, integer and bigint parameters alike.
impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => {
                match *ty {
                    Type::INT2 => out.put_i16(i16::try_from(*i)?),
                    Type::INT4 => out.put_i32(i32::try_from(*i)?),
                    Type::INT8 => out.put_i64(*i),
                    _ => return Err(format!("cannot send an integer as {ty}").into()),
                }
                Ok(IsNull::No)
            }
            Value::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    out.put_slice(s.as_bytes());
                    Ok(IsNull::No)
                }
                _ => Err(format!("cannot send text as {ty}").into()),
            },
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::INT2
                | Type::INT4
                | Type::INT8
                | Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
                | Type::UNKNOWN
        )
    }

    postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for Value {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Value, Box<dyn StdError + Sync + Send>> {
        Ok(match *ty {
            Type::INT2 => Value::Int(i64::from(i16::from_sql(ty, raw)?)),
            Type::INT4 => Value::Int(i64::from(i32::from_sql(ty, raw)?)),
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            _ => Value::Text(<&str>::from_sql(ty, raw)?.to_owned()),
        })
    }

    fn from_sql_null(_: &Type) -> Result<Value, Box<dyn StdError + Sync + Send>> {
        Ok(Value::Null)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::INT2 | Type::INT4 | Type::INT8) || <&str as FromSql>::accepts(ty)
    }
}

/// One connection, owned by one worker.
pub struct PgSession {
    client: Client,
    statements: Vec<Statement>,
}

fn statement(statements: &[Statement], id: StatementId) -> Result<&Statement, DbError> {
    statements.get(id).ok_or_else(|| DbError::new(None, format!("statement {id} was not prepared")))
}

/// Parameters as the references the client wants, without allocating: a
/// fixed array on the stack.
fn param_refs(params: &[Value]) -> Result<([&(dyn ToSql + Sync); PARAMS_MAX], usize), DbError> {
    if params.len() > PARAMS_MAX {
        return Err(DbError::new(None, format!("{} parameters, at most {PARAMS_MAX} supported", params.len())));
    }
    let mut refs: [&(dyn ToSql + Sync); PARAMS_MAX] = [&Value::Null; PARAMS_MAX];
    for (r, p) in refs.iter_mut().zip(params) {
        *r = p;
    }
    Ok((refs, params.len()))
}

impl Session for PgSession {
    fn prepare(&mut self, sql: &str) -> Result<StatementId, DbError> {
        if self.statements.len() >= STATEMENTS_PER_SESSION_MAX {
            return Err(DbError::new(None, format!("more than {STATEMENTS_PER_SESSION_MAX} prepared statements")));
        }
        let stmt = self.client.prepare(sql).map_err(|e| db_error(&e))?;
        self.statements.push(stmt);
        Ok(self.statements.len() - 1)
    }

    fn query(&mut self, stmt: StatementId, params: &[Value], out: &mut Vec<Value>) -> Result<usize, DbError> {
        out.clear();
        let statement = statement(&self.statements, stmt)?;
        let (refs, n) = param_refs(params)?;
        let mut rows = self.client.query_raw(statement, refs[..n].iter().copied()).map_err(|e| db_error(&e))?;
        let mut count = 0;
        while let Some(row) = rows.next().map_err(|e| db_error(&e))? {
            for i in 0..row.len() {
                out.push(row.try_get::<_, Value>(i).map_err(|e| db_error(&e))?);
            }
            count += 1;
        }
        Ok(count)
    }

    fn execute(&mut self, stmt: StatementId, params: &[Value]) -> Result<u64, DbError> {
        let statement = statement(&self.statements, stmt)?;
        let (refs, n) = param_refs(params)?;
        self.client.execute(statement, &refs[..n]).map_err(|e| db_error(&e))
    }

    fn simple_query(&mut self, sql: &str) -> Result<Vec<TextRow>, DbError> {
        let messages = self.client.simple_query(sql).map_err(|e| db_error(&e))?;
        let mut rows = Vec::new();
        for m in messages {
            if let postgres::SimpleQueryMessage::Row(row) = m {
                if rows.len() == SIMPLE_QUERY_ROWS_MAX {
                    return Err(too_many_rows());
                }
                rows.push((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect());
            }
        }
        Ok(rows)
    }

    fn begin(&mut self) -> Result<(), DbError> {
        self.client.batch_execute("BEGIN").map_err(|e| db_error(&e))
    }

    fn commit(&mut self) -> Result<(), DbError> {
        self.client.batch_execute("COMMIT").map_err(|e| db_error(&e))
    }

    fn rollback(&mut self) -> Result<(), DbError> {
        self.client.batch_execute("ROLLBACK").map_err(|e| db_error(&e))
    }
}

/// CPU time of one process in clock ticks (utime + stime), and of its
/// reaped children (cutime + cstime).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcTicks {
    pub own: u64,
    pub children: u64,
    pub parent_pid: u32,
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub fn proc_ticks(pid: u32) -> Option<ProcTicks> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat(&stat)
}

/// Fields after the command name (which may contain spaces and parens):
/// state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
pub fn parse_proc_stat(stat: &str) -> Option<ProcTicks> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    Some(ProcTicks {
        own: field(14)? + field(15)?,
        children: field(16)? + field(17)?,
        parent_pid: u32::try_from(field(4)?).ok()?,
    })
}

const WAIT_SAMPLE_SQL: &str = "SELECT count(*)::int8, count(*) FILTER (WHERE \
       (wait_event_type = 'IO' AND wait_event IN ('WALSync', 'WALWrite', 'WALInitSync', 'WALInitWrite')) \
    OR (wait_event_type = 'LWLock' AND wait_event = 'WALWrite') \
    OR (wait_event_type = 'IPC' AND wait_event = 'SyncRep'))::int8 \
    FROM pg_stat_activity \
    WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()";
const COUNTERS_SQL: &str = "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())::int8, \
    pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::int8";
const PIDS_SQL: &str = "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()";

/// What the sampling thread accumulates.
#[derive(Debug, Default)]
struct WaitTally {
    samples: u64,
    active: u64,
    wal_waiting: u64,
    /// pid → ticks at first sight (baseline) for CPU accounting.
    baselines: Vec<(u32, u64)>,
}

struct Running {
    started: Instant,
    commits_start: i64,
    wal_start: i64,
    postmaster: Option<(u32, ProcTicks)>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<(Client, WaitTally), DbError>>,
}

/// Samples a PostgreSQL server from a separate connection while a measure
/// window runs: `pg_stat_database.xact_commit` and WAL position deltas, wait
/// events of active client backends every ~10 ms (the sampler's own backend
/// excluded), and — when the server runs on this host — CPU of its processes
/// from /proc.
pub struct PgSampler {
    url: String,
    local: bool,
    running: Option<Running>,
}

impl PgSampler {
    pub fn new(url: String, local: bool) -> PgSampler {
        PgSampler { url, local, running: None }
    }

    fn counters(client: &mut Client) -> Result<(i64, i64), DbError> {
        // Stats are cached per transaction; autocommit gives a fresh view.
        let row = client.query_one(COUNTERS_SQL, &[]).map_err(|e| db_error(&e))?;
        let commits: Option<i64> = row.try_get(0).map_err(|e| db_error(&e))?;
        let wal: i64 = row.try_get(1).map_err(|e| db_error(&e))?;
        Ok((commits.unwrap_or(0), wal))
    }

    fn server_pids(client: &mut Client) -> Result<Vec<u32>, DbError> {
        let rows = client.query(PIDS_SQL, &[]).map_err(|e| db_error(&e))?;
        rows.iter().map(|r| r.try_get::<_, i32>(0).map(|p| p as u32).map_err(|e| db_error(&e))).collect()
    }

    fn source(client: &mut Client) -> String {
        client
            .query_one("SELECT 'postgresql ' || current_setting('server_version')", &[])
            .ok()
            .and_then(|r| r.try_get::<_, String>(0).ok())
            .unwrap_or_else(|| "postgresql".to_owned())
    }
}

fn sample_loop(mut client: Client, stop: &AtomicBool, track_cpu: bool) -> Result<(Client, WaitTally), DbError> {
    let wait_stmt = client.prepare(WAIT_SAMPLE_SQL).map_err(|e| db_error(&e))?;
    let mut tally = WaitTally::default();
    let mut next_refresh = Instant::now();
    let mut next = Instant::now();
    // At least one sample, however short the window: a window that a very
    // busy machine ended before the first sample had no figures at all.
    loop {
        let row = client.query_one(&wait_stmt, &[]).map_err(|e| db_error(&e))?;
        let active: i64 = row.try_get(0).map_err(|e| db_error(&e))?;
        let waiting: i64 = row.try_get(1).map_err(|e| db_error(&e))?;
        tally.samples += 1;
        tally.active += active as u64;
        tally.wal_waiting += waiting as u64;
        if track_cpu && Instant::now() >= next_refresh {
            // Processes that appear mid-window (e.g. autovacuum workers)
            // count from first sight.
            for pid in PgSampler::server_pids(&mut client)? {
                if !tally.baselines.iter().any(|(p, _)| *p == pid)
                    && let Some(t) = proc_ticks(pid)
                {
                    tally.baselines.push((pid, t.own));
                }
            }
            next_refresh = Instant::now() + PID_REFRESH_PERIOD;
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        next += SAMPLE_PERIOD;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    Ok((client, tally))
}

impl BackendSampler for PgSampler {
    fn start(&mut self) -> Result<(), DbError> {
        if self.running.is_some() {
            return Err(DbError::new(None, "sampler already running"));
        }
        let mut client = connect(&self.url).map_err(|e| connect_error(&e))?;
        let (commits_start, wal_start) = Self::counters(&mut client)?;
        // The postmaster is the parent of every backend, ours included; only
        // trusted when it really is a local postgres process.
        let postmaster = if self.local {
            let own_pid: i32 = client
                .query_one("SELECT pg_backend_pid()", &[])
                .and_then(|r| r.try_get(0))
                .map_err(|e| db_error(&e))?;
            proc_ticks(own_pid as u32).and_then(|t| proc_ticks(t.parent_pid).map(|p| (t.parent_pid, p)))
        } else {
            None
        };
        let stop = Arc::new(AtomicBool::new(false));
        let track_cpu = postmaster.is_some();
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("pg-sampler".to_owned())
                .spawn(move || sample_loop(client, &stop, track_cpu))
                .map_err(|e| DbError::new(None, format!("starting the sampler thread: {e}")))?
        };
        self.running = Some(Running { started: Instant::now(), commits_start, wal_start, postmaster, stop, thread });
        Ok(())
    }

    fn finish(&mut self) -> Result<BackendFigures, DbError> {
        let running = self.running.take().ok_or_else(|| DbError::new(None, "sampler was not started"))?;
        running.stop.store(true, Ordering::Relaxed);
        let window_s = running.started.elapsed().as_secs_f64();
        let (mut client, tally) =
            running.thread.join().map_err(|_| DbError::new(None, "the sampler thread panicked"))??;
        let (commits_end, wal_end) = Self::counters(&mut client)?;
        let cpu_percent = running.postmaster.map(|(pm_pid, pm_start)| {
            let mut ticks = 0u64;
            if let Some(pm_now) = proc_ticks(pm_pid) {
                // Children that exited in the window were reaped by the
                // postmaster: their whole CPU time shows in its cutime.
                ticks += pm_now.own.saturating_sub(pm_start.own);
                ticks += pm_now.children.saturating_sub(pm_start.children);
            }
            for (pid, base) in &tally.baselines {
                // A process gone since is already in the postmaster's cutime.
                if let Some(now) = proc_ticks(*pid) {
                    ticks += now.own.saturating_sub(*base);
                }
            }
            100.0 * ticks as f64 / crate::cpu::clock_ticks_per_s() / window_s
        });
        let commits = (commits_end - running.commits_start).max(0) as u64;
        let wal_bytes = (wal_end - running.wal_start).max(0) as u64;
        Ok(BackendFigures {
            source: Self::source(&mut client),
            window_s,
            commits,
            commits_per_s: commits as f64 / window_s,
            wal_bytes,
            wal_bytes_per_s: wal_bytes as f64 / window_s,
            wal_wait_share: if tally.active == 0 { 0.0 } else { tally.wal_waiting as f64 / tally.active as f64 },
            cpu_percent,
            samples: tally.samples,
            active_sessions: if tally.samples == 0 { 0.0 } else { tally.active as f64 / tally.samples as f64 },
            wal_wait_sessions: if tally.samples == 0 { 0.0 } else { tally.wal_waiting as f64 / tally.samples as f64 },
            process_cpu: Vec::new(),
        })
    }
}

impl Drop for PgSampler {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.stop.store(true, Ordering::Relaxed);
            let _ = running.thread.join();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_with_odd_command_name() {
        let stat = "1234 (postgres: a) b) S 77 1234 1234 0 -1 4194560 100 0 0 0 \
                    15 7 3 2 20 0 1 0 100 1000 10 18446744073709551615";
        let t = parse_proc_stat(stat).unwrap();
        assert_eq!(t.parent_pid, 77);
        assert_eq!(t.own, 22);
        assert_eq!(t.children, 5);
        assert!(parse_proc_stat("garbage").is_none());
    }

    #[test]
    fn own_process_ticks_are_readable() {
        let t = proc_ticks(std::process::id()).unwrap();
        assert!(t.parent_pid > 0);
    }

    #[test]
    fn local_urls() {
        assert!(url_is_local("postgres://u@127.0.0.1:5432/db"));
        assert!(url_is_local("postgres://u@localhost/db"));
        assert!(url_is_local("host=/tmp port=5499 user=postgres"));
        assert!(url_is_local("postgres://u@[::1]:5432/db"));
        assert!(!url_is_local("postgres://u@db.example.com/db"));
        assert!(!url_is_local("postgres://u@10.0.0.5/db"));
    }

    #[test]
    fn text_copy_escapes_delimiters() {
        let mut buf = Vec::new();
        encode_text(&mut buf, &Value::Text("a\tb\\c\nd".to_owned()));
        buf.push(b'|');
        encode_text(&mut buf, &Value::Null);
        buf.push(b'|');
        encode_text(&mut buf, &Value::Int(-42));
        assert_eq!(buf, b"a\\tb\\\\c\\nd|\\N|-42");
    }
}
