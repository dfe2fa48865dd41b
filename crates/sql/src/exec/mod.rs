//! Executor: runs plans on an engine transaction.
//!
//! Rows of a level are copied out of the engine before the next level runs
//! (the engine's scan callbacks may not call back into the engine), so a
//! nested-loop join holds one materialized batch per level. The primary-key
//! fast path reads straight into a reused [`RowBuf`] and writes the result
//! into reused buffers: in steady state it allocates nothing but what the
//! engine does.
//!
//! Here: [`Exec`], the result buffer and the row helpers the others share.
//! `scan` reads a level (key lookup, index or full scan) and runs the join;
//! `hash_join` finds a repeatedly scanned level's candidates in a hash
//! table; `virtual_rows` produces the rows of system relations, subqueries, set
//! operations and table functions; `select`, `dml` and `ddl` run their
//! statements; `aggregate` and `window` compute GROUP BY and window
//! functions; `sequence` holds nextval & co.

mod aggregate;
mod alter;
mod columnar;
mod ddl;
mod dml;
mod dml_join;
mod function;
mod hash_join;
mod merge;
mod plpgsql;
mod roles;
mod scan;
mod schema;
mod select;
mod sequence;
mod spill;
mod user_type;
mod view;
mod virtual_rows;
mod window;
mod window_frame;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use pgtier_engine::{RowBuf, RowRef, Transaction, Value, ValueRef};

pub(crate) use aggregate::{HypotheticalRank, REGR_PAIR, ordered_set};
pub use columnar::explain_route;
pub use hash_join::LevelHashes;
pub use sequence::SessionSequences;

use crate::catalog::SysCtx;
use crate::error::{Result, SqlError, SqlNotice};
use crate::expr::{Env, Expr, SeqFunc, Subquery, SubqueryKind, SubqueryRunner};
use crate::plan::ColumnMask;

/// Result rows, flat (`width` values per row); reused across executions.
#[derive(Debug, Default, Clone)]
pub struct ResultBuf {
    pub width: usize,
    pub rows: usize,
    pub values: Vec<Value>,
}

impl ResultBuf {
    pub fn reset(&mut self, width: usize) {
        self.width = width;
        self.rows = 0;
        self.values.clear();
    }

    pub fn push_row(&mut self, row: &[Value]) {
        debug_assert_eq!(row.len(), self.width);
        self.values.extend_from_slice(row);
        self.rows += 1;
    }

    pub fn row(&self, i: usize) -> &[Value] {
        &self.values[i * self.width..(i + 1) * self.width]
    }
}

/// Overwrites `slot` with `v`, reusing a string's buffer (no allocation in
/// steady state for text columns).
pub fn assign_ref(slot: &mut Value, v: ValueRef<'_>) {
    if let (Value::Text(s), ValueRef::Text(t)) = (&mut *slot, v) {
        s.clear();
        s.push_str(t);
        return;
    }
    *slot = v.to_owned_value();
}

/// Writes the row's columns that `projection` (plain columns only) names
/// into `values`, in place.
fn assign_columns(values: &mut [Value], projection: &[Expr], r: &RowRef<'_>) {
    for (slot, e) in values.iter_mut().zip(projection) {
        if let Expr::Column(c) = e {
            assign_ref(slot, r.get(*c));
        }
    }
}

fn set_len(buf: &mut Vec<Value>, n: usize) {
    buf.truncate(n);
    while buf.len() < n {
        buf.push(Value::Null);
    }
}

/// Appends the row's values; columns outside `mask` are appended as NULL
/// without being decoded.
fn read_row(r: &RowRef<'_>, mask: Option<&ColumnMask>, out: &mut Vec<Value>) {
    match mask {
        None => {
            for c in 0..r.len() {
                out.push(r.get(c).to_owned_value());
            }
        }
        Some(m) => {
            for c in 0..r.len() {
                out.push(if m.reads(c) { r.get(c).to_owned_value() } else { Value::Null });
            }
        }
    }
}

pub struct Exec<'a> {
    pub txn: &'a mut Transaction,
    pub now_micros: i64,
    pub rowbuf: &'a mut RowBuf,
    pub keybuf: &'a mut Vec<Value>,
    pub scratch: &'a mut Vec<Value>,
    /// DML buffers reused across executions: primary keys of the target rows
    /// (flat) and the row image the UPDATE closure evaluates on.
    pub dml_keys: &'a mut Vec<Value>,
    pub dml_row: &'a mut Vec<Value>,
    /// Emptied row buffers kept across executions for the join's candidate
    /// rows and joined row: a query allocates none once they have grown.
    pub row_pool: &'a mut Vec<Vec<Value>>,
    /// Results of uncorrelated subqueries, by subquery id (this execution only).
    pub sub_cache: HashMap<usize, Vec<Value>>,
    /// The session's settings: current_setting/set_config and pg_settings read them.
    pub settings: &'a mut crate::settings::Settings,
    /// NOTICEs for the client (`... does not exist, skipping`).
    pub notices: &'a mut Vec<SqlNotice>,
    /// What stops the statement early: a cancel request, statement_timeout.
    pub interrupt: Interrupt<'a>,
    /// The session's cache groups, for the pgtier_cache_* views.
    pub cache: Option<&'a pgtier_cache::Cache>,
    /// The database's columnar copies, for the pgtier_analytics views.
    pub analytics: Option<&'a crate::catalog::analytics::Analytics>,
    /// What `currval`/`lastval` return: this session's last `nextval`s.
    pub sequences: &'a mut SessionSequences,
    /// The statement only reads (a SELECT without FOR UPDATE, or the join
    /// phase of UPDATE ... FROM / DELETE ... USING / MERGE), so a level
    /// may be read once into a hash table (`hash_join`).
    pub hash_joins: bool,
    /// Levels with hash keys seen by this execution, by address.
    pub level_hashes: LevelHashes,
    /// The rows of the round in progress of each WITH RECURSIVE query, by slot.
    pub work_tables: Vec<Vec<Vec<Value>>>,
    /// The rows of each materialized WITH query read so far, by its id
    /// (`VirtualSource::Shared`): this execution only.
    pub shared_ctes: HashMap<usize, std::sync::Arc<Vec<Value>>>,
    /// Set by a join's sink that has seen enough rows (EXISTS needs one):
    /// the join in progress returns without reading further candidates.
    /// Whoever sets it clears it once that join has returned.
    pub join_stop: bool,
}

/// Rows between reads of the cancel flag and the clock: a long statement
/// stops within microseconds, and the hot path pays a counter.
const CANCEL_CHECK_ROWS: u32 = 1024;

/// What ends a statement before it is done, as PostgreSQL's
/// CHECK_FOR_INTERRUPTS does: the session's cancel flag (a CancelRequest,
/// 57014 "due to user request") and the statement's deadline
/// (statement_timeout, 57014 "due to statement timeout"). Every loop over
/// rows calls [`Interrupt::tick`] once a row: a counter, and every
/// [`CANCEL_CHECK_ROWS`] rows one atomic swap and, with a deadline, one
/// clock read.
///
/// It also keeps the statement's memory account (pgtier.statement_mem):
/// what sorts, hash aggregates and buffered results hold, charged as they
/// grow ([`Interrupt::charge`]), 53200 past the bound.
pub struct Interrupt<'a> {
    pub cancel: Option<&'a AtomicBool>,
    pub deadline: Option<Instant>,
    /// Rows since the last look at the flag and the clock.
    pub since: u32,
    /// Bytes charged and still held (approximate: [`value_bytes`]).
    pub mem_used: usize,
    /// pgtier.statement_mem in bytes (usize::MAX: no bound).
    pub mem_limit: usize,
}

/// What a value costs the memory account: its slot and its heap part.
#[inline]
pub fn value_bytes(v: &Value) -> usize {
    std::mem::size_of::<Value>()
        + match v {
            Value::Text(s) => s.len(),
            Value::Bytea(b) => b.len(),
            _ => 0,
        }
}

/// What a row costs the memory account (its Vec and its values).
#[inline]
pub fn row_bytes(row: &[Value]) -> usize {
    std::mem::size_of::<Vec<Value>>() + row.iter().map(value_bytes).sum::<usize>()
}

impl<'a> Interrupt<'a> {
    pub fn new(cancel: Option<&'a AtomicBool>, deadline: Option<Instant>, mem_limit: usize) -> Interrupt<'a> {
        Interrupt { cancel, deadline, since: 0, mem_used: 0, mem_limit }
    }

    /// Adds `bytes` that `what` (a sort, a hash aggregate, the result)
    /// now holds; 53200 once the statement holds more than
    /// pgtier.statement_mem. An add and a compare.
    #[inline]
    pub fn charge(&mut self, bytes: usize, what: &'static str) -> Result<()> {
        self.mem_used = self.mem_used.saturating_add(bytes);
        if self.mem_used > self.mem_limit {
            return Err(self.out_of_memory(what));
        }
        Ok(())
    }

    #[cold]
    fn out_of_memory(&self, what: &str) -> SqlError {
        let limit = crate::settings::format_kb(u32::try_from(self.mem_limit / 1024).unwrap_or(u32::MAX));
        SqlError::new("53200", "out of memory")
            .with_detail(format!("The {what} of this statement needed more than pgtier.statement_mem ({limit})."))
            .with_hint("Raise pgtier.statement_mem, or make the statement hold fewer rows.")
    }

    /// Counts one row of work; every [`CANCEL_CHECK_ROWS`] rows, the error
    /// that ends the statement if one is due. A cancel lowers the flag:
    /// one cancel, one statement.
    #[inline]
    pub fn tick(&mut self) -> Result<()> {
        self.since += 1;
        if self.since < CANCEL_CHECK_ROWS {
            return Ok(());
        }
        self.check()
    }

    /// Looks at the flag and the clock now.
    #[cold]
    pub fn check(&mut self) -> Result<()> {
        self.since = 0;
        if self.cancel.is_some_and(|flag| flag.swap(false, std::sync::atomic::Ordering::Relaxed)) {
            return Err(SqlError::canceled());
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(SqlError::statement_timeout());
        }
        Ok(())
    }
}

impl SubqueryRunner for Exec<'_> {
    fn check_interrupt(&mut self) -> Result<()> {
        self.interrupt.check()
    }

    /// A SQL function's body runs with its arguments as the parameters.
    /// Nothing of it is kept between calls: the hash tables and the rows
    /// of subqueries in FROM that a statement keeps are keyed by plan
    /// node, and a body's nodes are the same for calls with other
    /// arguments (its subqueries are all bound as correlated, so none is
    /// cached by id either).
    fn call_function(&mut self, plan: &crate::plan::SubPlan, args: &[Value]) -> Result<Value> {
        let hash_joins = std::mem::replace(&mut self.hash_joins, false);
        let rows = self.select_rows(plan, args, &[]);
        self.hash_joins = hash_joins;
        Ok(rows?.into_iter().next().and_then(|mut r| (!r.is_empty()).then(|| r.swap_remove(0))).unwrap_or(Value::Null))
    }

    fn call_plpgsql(&mut self, program: &crate::plan::PlRef, args: Vec<Value>) -> Result<Value> {
        self.call_program(&program.0, args)
    }

    fn run(&mut self, sub: &Subquery, env: &Env<'_>, outer: &[Value]) -> Result<Vec<Value>> {
        if !sub.correlated
            && let Some(v) = self.sub_cache.get(&sub.id)
        {
            return Ok(v.clone());
        }
        let firsts = self.subquery_values(sub, env, outer)?;
        if !sub.correlated {
            self.sub_cache.insert(sub.id, firsts.clone());
        }
        Ok(firsts)
    }

    /// A correlated EXISTS stops at its first row. Its select list, sort
    /// and DISTINCT are not evaluated, as PostgreSQL drops them
    /// (simplify_EXISTS_query); one whose row count depends on more than
    /// the join (aggregates, windows, LIMIT/OFFSET, FOR UPDATE) runs whole.
    fn exists(&mut self, sub: &Subquery, env: &Env<'_>, outer: &[Value]) -> Result<bool> {
        let plan = &sub.plan;
        if !sub.correlated
            || plan.agg.is_some()
            || !plan.windows.is_empty()
            || plan.limit.is_some()
            || plan.offset.is_some()
            || plan.for_update
        {
            return Ok(!self.run(sub, env, outer)?.is_empty());
        }
        let held_before = self.interrupt.mem_used;
        let env = self.env(env.params, outer);
        let mut row = self.pooled_row();
        row.resize(plan.width, Value::Null);
        let mut found = false;
        let joined = self.join(plan, 0, &mut row, &env, &mut |ex, _| {
            found = true;
            ex.join_stop = true;
            Ok(())
        });
        self.join_stop = false;
        self.interrupt.mem_used = held_before;
        self.return_row(row);
        joined.map(|()| found)
    }

    fn run_in(&mut self, sub: &Subquery, env: &Env<'_>, outer: &[Value], x: &Value) -> Result<Option<bool>> {
        if sub.correlated {
            let rows = self.run(sub, env, outer)?;
            return Ok(crate::expr::in_rows(x, &rows, sub.negated, sub.trims_rows()));
        }
        self.in_uncorrelated(sub, env, x)
    }

    fn system(&mut self) -> Option<SysCtx<'_>> {
        Some(SysCtx {
            catalog: self.txn.catalog(),
            settings: self.settings,
            cache: self.cache,
            analytics: self.analytics,
            standby: self.txn.is_standby(),
        })
    }

    fn sequence(&mut self, call: SeqFunc, args: &[Value]) -> Result<Value> {
        self.sequence_call(call, args)
    }
}

impl Exec<'_> {
    /// The first column of `sub`'s rows for the enclosing row `outer`, not cached.
    fn subquery_values(&mut self, sub: &Subquery, env: &Env<'_>, outer: &[Value]) -> Result<Vec<Value>> {
        let rows = self.select_rows(&sub.plan, env.params, outer)?;
        let column = match sub.kind {
            SubqueryKind::Scalar { column } => column,
            _ => 0,
        };
        Ok(rows.into_iter().map(|mut r| if column < r.len() { r.swap_remove(column) } else { Value::Null }).collect())
    }

    fn env<'e>(&self, params: &'e [Value], outer: &'e [Value]) -> Env<'e> {
        Env { params, now_micros: self.now_micros, outer }
    }

    fn passes(&mut self, filters: &[Expr], env: &Env<'_>, row: &[Value]) -> Result<bool> {
        for f in filters {
            if f.eval_bool(env, self, row)? != Some(true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// An empty buffer from [`Exec::row_pool`] (or a new one).
    fn pooled_row(&mut self) -> Vec<Value> {
        self.row_pool.pop().unwrap_or_default()
    }

    /// Gives a buffer back to [`Exec::row_pool`]; the pool stays small
    /// (one buffer per join level in use at once).
    fn return_row(&mut self, mut buf: Vec<Value>) {
        const POOL_BUFFERS_MAX: usize = 16;
        if self.row_pool.len() < POOL_BUFFERS_MAX {
            buf.clear();
            self.row_pool.push(buf);
        }
    }
}
