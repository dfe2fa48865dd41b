//! Runs a PL/pgSQL program (`plan::PlProgram`, bound by bind/plpgsql.rs):
//! its slots are the parameters every expression and SQL statement of it
//! reads. A block with an EXCEPTION section runs inside an engine
//! savepoint, as PostgreSQL's subtransaction: an error a handler catches
//! rolls back what the block did and the handler runs; no error releases
//! the savepoint.

use pgtier_engine::{DataType, Value};

use super::{Exec, ResultBuf};
use crate::error::{Result, SqlError, SqlNotice};
use crate::plan::{BoundTrigger, PlBlock, PlExpr, PlLevel, PlLoop, PlProgram, PlReturn, PlStmt, Plan, TableTriggers};

/// How a statement ended.
enum Flow {
    Next,
    Exit(Option<String>),
    Continue(Option<String>),
    Return(Value),
    /// A trigger function's row (None: NULL, skip the row).
    Row(Option<Vec<Value>>),
}

/// A running call: the slots and the last statement's row count.
pub(crate) struct Frame {
    pub slots: Vec<Value>,
    row_count: u64,
}

fn as_int(v: Value, what: &str) -> Result<i64> {
    match v {
        Value::Int4(i) => Ok(i64::from(i)),
        Value::Null => Err(SqlError::new("22004", format!("{what} of FOR loop cannot be null"))),
        other => match crate::value::cast(other, DataType::Int8, false)? {
            Value::Int8(i) => Ok(i),
            _ => Err(SqlError::new("22004", format!("{what} of FOR loop cannot be null"))),
        },
    }
}

/// RAISE's format: each `%` is the next argument's text (`<NULL>` for
/// NULL), `%%` a `%`.
fn format_message(format: &str, args: &[Value]) -> String {
    let mut out = String::with_capacity(format.len());
    let mut next = args.iter();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
        } else if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
        } else {
            match next.next() {
                Some(Value::Null) | None => out.push_str("<NULL>"),
                Some(Value::Text(t)) => out.push_str(t),
                Some(v) => crate::value::write_text(v, &mut out),
            }
        }
    }
    out
}

impl Exec<'_> {
    /// A PL/pgSQL function's value for `args`.
    pub(crate) fn call_program(&mut self, p: &PlProgram, args: Vec<Value>) -> Result<Value> {
        let mut f = self.frame(p, args);
        match self.run_program(p, &mut f)? {
            Flow::Return(v) => Ok(v),
            _ => Err(SqlError::new("2F005", "control reached end of function without RETURN")),
        }
    }

    /// A trigger function run with its slots filled (NEW, OLD, TG_*): the
    /// row it returned (its NEW or OLD slots) or None for NULL.
    pub(crate) fn call_trigger(&mut self, p: &PlProgram, slots: Vec<Value>) -> Result<Option<Vec<Value>>> {
        let mut f = self.frame(p, slots);
        match self.run_program(p, &mut f)? {
            Flow::Row(r) => Ok(r),
            _ => Err(SqlError::new("2F005", "control reached end of trigger procedure without RETURN")),
        }
    }

    fn frame(&self, p: &PlProgram, mut slots: Vec<Value>) -> Frame {
        slots.resize(p.slots.len(), Value::Null);
        slots[p.found] = Value::Bool(false);
        Frame { slots, row_count: 0 }
    }

    fn run_program(&mut self, p: &PlProgram, f: &mut Frame) -> Result<Flow> {
        let hash_joins = std::mem::replace(&mut self.hash_joins, false);
        let flow = self.pl_block(p, &p.body, f);
        self.hash_joins = hash_joins;
        flow
    }

    fn pl_eval(&mut self, e: &PlExpr, f: &Frame) -> Result<Value> {
        match e {
            PlExpr::Expr(x) => {
                let env = self.env(&f.slots, &[]);
                x.eval(&env, self, &[])
            }
            PlExpr::Query(q) => {
                let mut rows = self.select_rows(q, &f.slots, &[])?;
                if rows.len() > 1 {
                    return Err(SqlError::new("21000", "query returned more than one row"));
                }
                Ok(rows.pop().and_then(|mut r| (!r.is_empty()).then(|| r.swap_remove(0))).unwrap_or(Value::Null))
            }
        }
    }

    fn pl_true(&mut self, e: &PlExpr, f: &Frame) -> Result<bool> {
        Ok(matches!(self.pl_eval(e, f)?, Value::Bool(true)))
    }

    fn pl_block(&mut self, p: &PlProgram, b: &PlBlock, f: &mut Frame) -> Result<Flow> {
        let flow = if b.handlers.is_empty() {
            self.pl_block_body(p, b, f)
        } else {
            let sp = self.txn.savepoint()?;
            match self.pl_block_body(p, b, f) {
                Ok(flow) => {
                    self.txn.release_savepoint(sp)?;
                    Ok(flow)
                }
                Err(e) => {
                    let Some(h) = b.handlers.iter().find(|h| crate::plpgsql::code_matches(&h.codes, e.sqlstate)) else {
                        return Err(e);
                    };
                    self.txn.rollback_to_savepoint(sp)?;
                    self.txn.release_savepoint(sp)?;
                    if let Some((state, errm)) = b.error_slots {
                        f.slots[state] = Value::Text(e.sqlstate.to_owned());
                        f.slots[errm] = Value::Text(e.message.clone());
                    }
                    self.pl_stmts(p, &h.body, f)
                }
            }
        }?;
        Ok(match flow {
            Flow::Exit(Some(l)) if b.label.as_ref() == Some(&l) => Flow::Next,
            other => other,
        })
    }

    fn pl_block_body(&mut self, p: &PlProgram, b: &PlBlock, f: &mut Frame) -> Result<Flow> {
        for (slot, default, not_null, name) in &b.init {
            let v = match default {
                Some(e) => self.pl_eval(e, f)?,
                None => Value::Null,
            };
            if *not_null && v.is_null() {
                return Err(SqlError::new(
                    "22004",
                    format!("null value cannot be assigned to variable \"{name}\" declared NOT NULL"),
                ));
            }
            f.slots[*slot] = v;
        }
        self.pl_stmts(p, &b.body, f)
    }

    fn pl_stmts(&mut self, p: &PlProgram, stmts: &[PlStmt], f: &mut Frame) -> Result<Flow> {
        for st in stmts {
            match self.pl_stmt(p, st, f)? {
                Flow::Next => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Next)
    }

    fn pl_stmt(&mut self, p: &PlProgram, st: &PlStmt, f: &mut Frame) -> Result<Flow> {
        match st {
            PlStmt::Assign { slot, expr, .. } => {
                f.slots[*slot] = self.pl_eval(expr, f)?;
            }
            PlStmt::If { arms, otherwise } => {
                for (cond, body) in arms {
                    if self.pl_true(cond, f)? {
                        return self.pl_stmts(p, body, f);
                    }
                }
                return self.pl_stmts(p, otherwise, f);
            }
            PlStmt::Loop { label, kind, body } => return self.pl_loop(p, label.as_ref(), kind, body, f),
            PlStmt::Exit { cont, label, when } => {
                if let Some(w) = when
                    && !self.pl_true(w, f)?
                {
                    return Ok(Flow::Next);
                }
                return Ok(if *cont { Flow::Continue(label.clone()) } else { Flow::Exit(label.clone()) });
            }
            PlStmt::Return(PlReturn::Value(e)) => {
                let v = match e {
                    Some(e) => self.pl_eval(e, f)?,
                    None => Value::Null,
                };
                return Ok(Flow::Return(v));
            }
            PlStmt::Return(PlReturn::Row(slots)) => {
                return Ok(Flow::Row(slots.as_ref().map(|s| s.iter().map(|k| f.slots[*k].clone()).collect())));
            }
            PlStmt::Raise { level, code, format, args, options } => {
                self.pl_raise(*level, code, format, args, options, f)?
            }
            PlStmt::Sql { plan, into, what } => self.pl_sql(plan, into.as_ref(), what, p.found, f)?,
            PlStmt::RowCount(targets) => {
                for (slot, ty) in targets {
                    let n = i64::try_from(f.row_count).unwrap_or(i64::MAX);
                    f.slots[*slot] = crate::value::cast(Value::Int8(n), *ty, false)?;
                }
            }
            PlStmt::Block(b) => return self.pl_block(p, b, f),
            PlStmt::Error(e) => return Err(e.clone()),
            PlStmt::Null => {}
        }
        Ok(Flow::Next)
    }

    /// One pass of a loop's body: Some(flow) ends the loop with it.
    fn pl_iteration(
        &mut self,
        p: &PlProgram,
        label: Option<&String>,
        body: &[PlStmt],
        f: &mut Frame,
    ) -> Result<Option<Flow>> {
        self.interrupt.tick()?;
        Ok(match self.pl_stmts(p, body, f)? {
            Flow::Next => None,
            Flow::Exit(None) => Some(Flow::Next),
            Flow::Exit(Some(l)) if label == Some(&l) => Some(Flow::Next),
            Flow::Continue(None) => None,
            Flow::Continue(Some(l)) if label == Some(&l) => None,
            other => Some(other),
        })
    }

    fn pl_loop(
        &mut self,
        p: &PlProgram,
        label: Option<&String>,
        kind: &PlLoop,
        body: &[PlStmt],
        f: &mut Frame,
    ) -> Result<Flow> {
        match kind {
            PlLoop::Plain => loop {
                if let Some(flow) = self.pl_iteration(p, label, body, f)? {
                    return Ok(flow);
                }
            },
            PlLoop::While(cond) => {
                while self.pl_true(cond, f)? {
                    if let Some(flow) = self.pl_iteration(p, label, body, f)? {
                        return Ok(flow);
                    }
                }
                Ok(Flow::Next)
            }
            PlLoop::Range { slot, reverse, lo, hi, step } => {
                let lo = as_int(self.pl_eval(lo, f)?, "lower bound")?;
                let hi = as_int(self.pl_eval(hi, f)?, "upper bound")?;
                let step = match step {
                    Some(s) => as_int(self.pl_eval(s, f)?, "BY value")?,
                    None => 1,
                };
                if step <= 0 {
                    return Err(SqlError::new("22023", "BY value of FOR loop must be greater than zero"));
                }
                let mut i = lo;
                let mut found = false;
                while if *reverse { i >= hi } else { i <= hi } {
                    found = true;
                    f.slots[*slot] = Value::Int4(i32::try_from(i).map_err(|_| SqlError::out_of_range("integer"))?);
                    if let Some(flow) = self.pl_iteration(p, label, body, f)? {
                        f.slots[p.found] = Value::Bool(true);
                        return Ok(flow);
                    }
                    let Some(next) = (if *reverse { i.checked_sub(step) } else { i.checked_add(step) }) else {
                        break;
                    };
                    i = next;
                }
                f.slots[p.found] = Value::Bool(found);
                Ok(Flow::Next)
            }
            PlLoop::Query { query, assign } => {
                let rows = self.select_rows(query, &f.slots, &[])?;
                let found = !rows.is_empty();
                for row in rows {
                    self.pl_assign_row(assign, &row, f)?;
                    if let Some(flow) = self.pl_iteration(p, label, body, f)? {
                        f.slots[p.found] = Value::Bool(true);
                        return Ok(flow);
                    }
                }
                f.slots[p.found] = Value::Bool(found);
                Ok(Flow::Next)
            }
        }
    }

    fn pl_assign_row(&mut self, assign: &[(usize, crate::expr::Expr)], row: &[Value], f: &mut Frame) -> Result<()> {
        let mut values = Vec::with_capacity(assign.len());
        {
            let env = self.env(&f.slots, &[]);
            for (_, e) in assign {
                values.push(e.eval(&env, self, row)?);
            }
        }
        for ((slot, _), v) in assign.iter().zip(values) {
            f.slots[*slot] = v;
        }
        Ok(())
    }

    fn pl_raise(
        &mut self,
        level: PlLevel,
        code: &'static str,
        format: &Option<String>,
        args: &[PlExpr],
        options: &[(String, PlExpr)],
        f: &mut Frame,
    ) -> Result<()> {
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            values.push(self.pl_eval(a, f)?);
        }
        let mut message = format.as_deref().map(|fmt| format_message(fmt, &values)).unwrap_or_default();
        let (mut detail, mut hint) = (None, None);
        for (opt, e) in options {
            let v = match self.pl_eval(e, f)? {
                Value::Null => {
                    return Err(SqlError::new("22004", "RAISE statement option cannot be null"));
                }
                Value::Text(t) => t,
                other => {
                    let mut s = String::new();
                    crate::value::write_text(&other, &mut s);
                    s
                }
            };
            match opt.as_str() {
                "message" => message = v,
                "detail" => detail = Some(v),
                _ => hint = Some(v),
            }
        }
        match level {
            PlLevel::Exception => {
                let mut e = SqlError::new(code, message);
                if let Some(d) = detail {
                    e = e.with_detail(d);
                }
                if let Some(h) = hint {
                    e = e.with_hint(h);
                }
                Err(e)
            }
            PlLevel::Quiet => Ok(()),
            PlLevel::Info | PlLevel::Notice | PlLevel::Warning => {
                let sqlstate = if code == "00000" && level == PlLevel::Warning { "01000" } else { code };
                self.notices.push(SqlNotice { sqlstate, message });
                Ok(())
            }
        }
    }

    fn pl_sql(
        &mut self,
        plan: &Plan,
        into: Option<&crate::plan::PlInto>,
        what: &str,
        found: usize,
        f: &mut Frame,
    ) -> Result<()> {
        let mut out = ResultBuf::default();
        let (count, rows): (u64, Vec<Vec<Value>>) = match plan {
            Plan::Select(s) => {
                let rows = self.select_rows(s, &f.slots, &[])?;
                (rows.len() as u64, rows)
            }
            other => {
                let n = self.pl_write(other, &f.slots, &mut out)?;
                let rows = (0..out.rows).map(|i| out.row(i).to_vec()).collect();
                (n, rows)
            }
        };
        f.row_count = count;
        f.slots[found] = Value::Bool(count > 0);
        if let Some(into) = into {
            let n = rows.len();
            if n == 0 && into.strict {
                return Err(SqlError::new("P0002", "query returned no rows"));
            }
            if n > 1 && (into.strict || what != "SELECT") {
                return Err(SqlError::new("P0003", "query returned more than one row")
                    .with_hint("Make sure the query returns a single row, or use LIMIT 1."));
            }
            match rows.first() {
                Some(row) => self.pl_assign_row(&into.assign, row, f)?,
                None => {
                    for (slot, _) in &into.assign {
                        f.slots[*slot] = Value::Null;
                    }
                }
            }
        }
        Ok(())
    }

    fn pl_write(&mut self, plan: &Plan, params: &[Value], out: &mut ResultBuf) -> Result<u64> {
        match plan {
            Plan::Insert(i) => self.insert(i, params, out),
            Plan::Update(u) => self.update(u, params, out),
            Plan::Delete(d) => self.delete(d, params, out),
            Plan::Partitioned(plans) => {
                let mut n = 0;
                for (k, p) in plans.iter().enumerate() {
                    let mut rows = ResultBuf::default();
                    n += self.pl_write(p, params, &mut rows)?;
                    if k == 0 {
                        out.reset(rows.width);
                    }
                    out.values.extend(rows.values);
                    out.rows += rows.rows;
                }
                Ok(n)
            }
            _ => Err(SqlError::new("XX000", "statement kind not planned for PL/pgSQL")),
        }
    }
}

/// A row event an AFTER trigger fires for: (NEW, OLD).
pub(crate) type AfterEvent = (Option<Vec<Value>>, Option<Vec<Value>>);

impl Exec<'_> {
    /// Runs trigger `t` for one row: its function's returned row (the
    /// table's visible columns) or None for NULL.
    fn fire_trigger(
        &mut self,
        t: &BoundTrigger,
        op: &str,
        before: bool,
        new: Option<&[Value]>,
        old: Option<&[Value]>,
    ) -> Result<Option<Vec<Value>>> {
        let mut slots = Vec::with_capacity(2 + 2 * t.columns.len() + 8);
        slots.push(Value::Null);
        for row in [new, old] {
            slots.extend(t.columns.iter().map(|&c| row.map_or(Value::Null, |r| r[c].clone())));
        }
        let when = if before { "BEFORE" } else { "AFTER" };
        for v in [op, t.name.as_str(), when, "ROW", &t.table_name, &t.schema_name, &t.table_name] {
            slots.push(Value::Text(v.to_owned()));
        }
        slots.push(Value::Int4(0));
        self.call_trigger(&t.program.0, slots)
    }

    /// The BEFORE triggers of a row, in name order: for INSERT and UPDATE
    /// the row to write (each trigger sees the previous one's NEW), for
    /// DELETE `old`; None when one returned NULL (the row is skipped).
    pub(crate) fn before_row(
        &mut self,
        triggers: &TableTriggers,
        op: &str,
        new: Option<Vec<Value>>,
        old: Option<&[Value]>,
    ) -> Result<Option<Vec<Value>>> {
        let mut current = new;
        for t in &triggers.before {
            let Some(returned) = self.fire_trigger(t, op, true, current.as_deref(), old)? else {
                return Ok(None);
            };
            if let Some(row) = &mut current {
                for (k, &c) in t.columns.iter().enumerate() {
                    row[c] = returned[k].clone();
                }
            }
        }
        Ok(current.or_else(|| old.map(<[Value]>::to_vec)))
    }

    /// The AFTER triggers of a statement's rows, at its end: row by row,
    /// each row's triggers in name order (PostgreSQL's after-trigger queue).
    pub(crate) fn after_rows(&mut self, triggers: &TableTriggers, op: &str, events: Vec<AfterEvent>) -> Result<()> {
        for (new, old) in events {
            for t in &triggers.after {
                self.fire_trigger(t, op, false, new.as_deref(), old.as_deref())?;
            }
        }
        Ok(())
    }
}
