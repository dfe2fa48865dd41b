//! SQL cursors: DECLARE, FETCH, MOVE, CLOSE (PostgreSQL's portalcmds.c
//! and pquery.c's DoPortalRunFetch).
//!
//! A cursor's query runs at DECLARE and its rows are kept: PostgreSQL's
//! cursor reads the snapshot DECLARE took, and the rows as of that
//! snapshot are exactly that. Positions are PostgreSQL's: 0 before the
//! first row, 1..=n on a row, n+1 after the last.
//!
//! PostgreSQL lets a cursor declared without SCROLL move backward when its
//! plan can run backward; pgtier has no such plan to ask, so it decides by
//! the query's shape where every plan PostgreSQL could pick agrees
//! (session/backward.rs), and refuses backward motion otherwise (0A000).

use sqlparser::ast::{CloseCursor, Declare, DeclareType, FetchDirection, Ident, Statement};

use super::prepared::Utility;
use super::rows::{CommandTag, Tag};
use super::{Block, Connection, Rows};
use crate::error::{Result, SqlError};
use crate::exec::ResultBuf;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scroll {
    Yes,
    /// NO SCROLL as written: backward motion is PostgreSQL's error.
    No,
    /// Neither, and PostgreSQL's plan may or may not run backward:
    /// pgtier refuses backward motion.
    Unsaid,
}

struct Cursor {
    name: String,
    rows: Rows,
    pos: usize,
    scroll: Scroll,
    hold: bool,
    /// Declared in the open transaction: its rollback closes the cursor,
    /// WITH HOLD or not.
    pending: bool,
    /// The savepoints of the block when it was declared: a ROLLBACK TO
    /// one of them closes it.
    depth: usize,
}

/// The session's open cursors.
#[derive(Default)]
pub(super) struct Cursors {
    open: Vec<Cursor>,
}

impl Cursors {
    /// The transaction ended: a commit keeps the WITH HOLD cursors, a
    /// rollback those declared before it; the others close.
    pub(super) fn end_txn(&mut self, committed: bool) {
        self.open.retain(|c| c.hold && (committed || !c.pending));
        for c in &mut self.open {
            c.pending = false;
        }
    }

    /// ROLLBACK TO the savepoint at `depth` (0: the outermost) closes the
    /// cursors declared after it, as PostgreSQL's subtransaction abort does.
    pub(super) fn rolled_back_to(&mut self, depth: usize) {
        self.open.retain(|c| !c.pending || c.depth <= depth);
    }

    /// RELEASE of the savepoint at `depth`: what was declared after it
    /// now belongs to the savepoint before it.
    pub(super) fn released(&mut self, depth: usize) {
        for c in &mut self.open {
            c.depth = c.depth.min(depth);
        }
    }
}

/// One motion, counts signed as PostgreSQL's FetchStmt keeps them;
/// `i64::MAX` is ALL.
#[derive(Clone, Copy)]
enum Motion {
    Forward(i64),
    Backward(i64),
    Absolute(i64),
    Relative(i64),
}

fn motion(d: &FetchDirection) -> Result<Motion> {
    let count = |v: &sqlparser::ast::ValueWithSpan| match &v.value {
        sqlparser::ast::Value::Number(n, _) => n.parse::<i64>().map_err(|_| SqlError::syntax("invalid FETCH count")),
        _ => Err(SqlError::unsupported("FETCH with a parameter count")),
    };
    Ok(match d {
        FetchDirection::Next | FetchDirection::Forward { limit: None } => Motion::Forward(1),
        FetchDirection::Prior | FetchDirection::Backward { limit: None } => Motion::Backward(1),
        FetchDirection::First => Motion::Absolute(1),
        FetchDirection::Last => Motion::Absolute(-1),
        FetchDirection::All | FetchDirection::ForwardAll => Motion::Forward(i64::MAX),
        FetchDirection::BackwardAll => Motion::Backward(i64::MAX),
        FetchDirection::Count { limit } | FetchDirection::Forward { limit: Some(limit) } => {
            Motion::Forward(count(limit)?)
        }
        FetchDirection::Backward { limit: Some(limit) } => Motion::Backward(count(limit)?),
        FetchDirection::Absolute { limit } => Motion::Absolute(count(limit)?),
        FetchDirection::Relative { limit } => Motion::Relative(count(limit)?),
    })
}

impl Cursor {
    fn len(&self) -> i64 {
        self.rows.len() as i64
    }

    /// Backward motion (or a rewind after moving) on a cursor that may
    /// not scan backward.
    fn check_backward(&self) -> Result<()> {
        match self.scroll {
            Scroll::Yes => Ok(()),
            Scroll::No => Err(SqlError::new("55000", "cursor can only scan forward")
                .with_hint("Declare it with SCROLL option to enable backward scan.")),
            Scroll::Unsaid => Err(SqlError::unsupported("backward motion of a cursor declared without SCROLL")),
        }
    }

    /// Moves as `m` says; the rows passed over in order (positions,
    /// 1-based). A MOVE 0 only asks whether the cursor is on a row, so
    /// it never steps back to re-read it.
    fn step(&mut self, m: Motion, is_move: bool) -> Result<Vec<i64>> {
        let (n, pos) = (self.len(), self.pos as i64);
        let on_row = (1..=n).contains(&pos);
        let land = |c: &mut Cursor, target: i64| {
            c.pos = target.clamp(0, n + 1) as usize;
            if (1..=n).contains(&target) { vec![target] } else { Vec::new() }
        };
        match m {
            Motion::Forward(0) | Motion::Backward(0) | Motion::Relative(0) => {
                if on_row && !is_move {
                    self.check_backward()?;
                }
                Ok(if on_row { vec![pos] } else { Vec::new() })
            }
            Motion::Forward(c) if c < 0 => self.step(Motion::Backward(-c), is_move),
            Motion::Backward(c) if c < 0 => self.step(Motion::Forward(-c), is_move),
            Motion::Forward(c) => {
                let last = pos.saturating_add(c).min(n);
                let rows: Vec<i64> = (pos + 1..=last).collect();
                self.pos = if (rows.len() as i64) < c { n + 1 } else { pos + c } as usize;
                Ok(rows)
            }
            Motion::Backward(c) => {
                self.check_backward()?;
                let first = pos.saturating_sub(c).max(1);
                let rows: Vec<i64> = (first..pos.min(n + 1)).rev().collect();
                self.pos = if (rows.len() as i64) < c { 0 } else { pos - c } as usize;
                Ok(rows)
            }
            Motion::Absolute(k) => {
                if k < 0 || (pos > 0 && k <= pos) {
                    self.check_backward()?;
                }
                Ok(if k < 0 { land(self, (n + 1 + k).max(0)) } else { land(self, k.min(n + 1)) })
            }
            Motion::Relative(k) => {
                if k < 0 {
                    self.check_backward()?;
                }
                Ok(land(self, pos.saturating_add(k).clamp(0, n + 1)))
            }
        }
    }
}

impl Connection {
    /// DECLARE name [BINARY] [ASENSITIVE|INSENSITIVE] [[NO] SCROLL] CURSOR
    /// [WITH[OUT] HOLD] FOR query.
    pub(super) fn declare_cursor(&mut self, stmts: &[Declare]) -> Result<Utility> {
        let [d] = stmts else { return Err(SqlError::syntax("DECLARE of more than one cursor")) };
        let (Some(DeclareType::Cursor), Some(query), [name]) = (&d.declare_type, &d.for_query, &d.names[..]) else {
            return Err(SqlError::syntax("DECLARE is for cursors only outside PL/pgSQL"));
        };
        self.cursor_statement_allowed()?;
        if d.binary == Some(true) {
            return Err(SqlError::unsupported("DECLARE BINARY CURSOR"));
        }
        let name = super::prepared::ident_name(name);
        let hold = d.hold == Some(true);
        if !hold && self.block == Block::None {
            return Err(SqlError::new("25P01", "DECLARE CURSOR can only be used in transaction blocks"));
        }
        if self.cursors.open.iter().any(|c| c.name == name) {
            return Err(SqlError::new("42P03", format!("cursor \"{name}\" already exists")));
        }
        if !query.locks.is_empty() {
            return Err(SqlError::unsupported("DECLARE CURSOR ... FOR UPDATE/SHARE"));
        }
        let ps = self.try_prepare_statement(Statement::Query(query.clone()))?;
        if !ps.prepared.lock().modifying.is_empty() {
            return Err(SqlError::unsupported("DECLARE CURSOR over a data-modifying WITH"));
        }
        // A utility statement gets no Bind values here (psycopg 3 binds a
        // named cursor's parameters so).
        if !ps.param_types().is_empty() {
            return Err(SqlError::unsupported("DECLARE CURSOR with parameters"));
        }
        let rows = self.query(&ps, &[])?;
        let scroll = match d.scroll {
            Some(true) => Scroll::Yes,
            Some(false) => Scroll::No,
            None => {
                let (deps, types) = {
                    let p = ps.prepared.lock();
                    (p.deps.clone(), p.columns().iter().map(|c| c.ty).collect::<Vec<_>>())
                };
                let declared = super::backward::Declared { query, deps: &deps, types: &types };
                let shape = match self.open_txn() {
                    Some(t) => super::backward::backward(&declared, t.catalog()),
                    None => super::backward::backward(&declared, &self.db.catalog()),
                };
                match shape {
                    super::backward::Backward::Sure => Scroll::Yes,
                    super::backward::Backward::Never => Scroll::No,
                    super::backward::Backward::Unsure => Scroll::Unsaid,
                }
            }
        };
        let pending = self.block != Block::None;
        let depth = self.savepoint_depth();
        self.cursors.open.push(Cursor { name, rows, pos: 0, scroll, hold, pending, depth });
        Ok(Utility::Done(CommandTag { tag: Tag::Plain("DECLARE CURSOR"), rows: 0 }))
    }

    /// FETCH (rows) or MOVE (`is_move`: the count only).
    pub(super) fn fetch_cursor(&mut self, name: &Ident, d: &FetchDirection, is_move: bool) -> Result<Utility> {
        self.cursor_statement_allowed()?;
        let m = motion(d)?;
        let name = super::prepared::ident_name(name);
        let Some(c) = self.cursors.open.iter_mut().find(|c| c.name == name) else {
            return Err(SqlError::new("34000", format!("cursor \"{name}\" does not exist")));
        };
        let picked = c.step(m, is_move)?;
        let count = picked.len() as u64;
        if is_move {
            return Ok(Utility::Done(CommandTag { tag: Tag::Counted("MOVE"), rows: count }));
        }
        let mut buf = ResultBuf::default();
        buf.reset(c.rows.buf.width);
        for p in picked {
            buf.push_row(c.rows.buf.row(p as usize - 1));
        }
        let rows = Rows { columns: c.rows.columns.clone(), buf };
        Ok(Utility::Rows { rows, tag: CommandTag { tag: Tag::Counted("FETCH"), rows: count } })
    }

    /// CLOSE name | ALL.
    pub(super) fn close_cursor(&mut self, which: &CloseCursor) -> Result<Utility> {
        self.cursor_statement_allowed()?;
        let tag = match which {
            CloseCursor::All => {
                self.cursors.open.clear();
                "CLOSE CURSOR ALL"
            }
            CloseCursor::Specific { name } => {
                let name = super::prepared::ident_name(name);
                let Some(i) = self.cursors.open.iter().position(|c| c.name == name) else {
                    return Err(SqlError::new("34000", format!("cursor \"{name}\" does not exist")));
                };
                self.cursors.open.remove(i);
                "CLOSE CURSOR"
            }
        };
        Ok(Utility::Done(CommandTag { tag: Tag::Plain(tag), rows: 0 }))
    }

    fn cursor_statement_allowed(&self) -> Result<()> {
        if self.block == Block::Failed {
            return Err(SqlError::transaction_aborted());
        }
        Ok(())
    }
}
