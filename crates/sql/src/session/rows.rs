//! What running a statement gives back: [`Rows`] and [`Row`] (owned, for
//! the embedded API), [`ExecResult`], and for the server [`ResultRows`]
//! (rows lent from the connection's result buffer) and [`CommandTag`].

use std::sync::Arc;

use pgtier_engine::Value;

use super::Column;
use crate::exec::ResultBuf;
use crate::value;

/// Rows returned by a query (owned).
#[derive(Clone, Debug)]
pub struct Rows {
    pub(super) columns: Arc<[Column]>,
    pub(super) buf: ResultBuf,
}

impl Rows {
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }
    pub fn len(&self) -> usize {
        self.buf.rows
    }
    pub fn is_empty(&self) -> bool {
        self.buf.rows == 0
    }
    pub fn get(&self, i: usize) -> Option<Row<'_>> {
        (i < self.buf.rows).then(|| Row { columns: &self.columns, values: self.buf.row(i) })
    }
    pub fn iter(&self) -> impl Iterator<Item = Row<'_>> {
        (0..self.buf.rows).map(|i| Row { columns: &self.columns, values: self.buf.row(i) })
    }
    /// The rows lent as [`Connection::execute_with`](super::Connection::execute_with) lends them.
    pub fn result_rows(&self) -> ResultRows<'_> {
        ResultRows { values: &self.buf.values, width: self.buf.width, rows: self.buf.rows }
    }
}

/// One result row: values by position or by column name.
#[derive(Clone, Copy, Debug)]
pub struct Row<'a> {
    columns: &'a [Column],
    values: &'a [Value],
}

impl<'a> Row<'a> {
    pub fn len(&self) -> usize {
        self.values.len()
    }
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
    pub fn get(&self, i: usize) -> Option<&'a Value> {
        self.values.get(i)
    }
    /// First column with this name (as PostgreSQL drivers resolve names).
    pub fn get_by_name(&self, name: &str) -> Option<&'a Value> {
        self.columns.iter().position(|c| c.name == name).and_then(|i| self.values.get(i))
    }
    pub fn values(&self) -> &'a [Value] {
        self.values
    }
    /// PostgreSQL's text form of column `i` (NULL as None).
    pub fn text(&self, i: usize) -> Option<String> {
        self.values.get(i).filter(|v| !v.is_null()).map(value::to_text)
    }
}

/// Outcome of one statement.
#[derive(Clone, Debug)]
pub struct ExecResult {
    /// PostgreSQL's command tag (`INSERT 0 1`, `SELECT 3`, `BEGIN`).
    pub tag: String,
    /// Rows inserted/updated/deleted, or returned by a SELECT.
    pub rows_affected: u64,
    /// Result rows for SELECT and DML with RETURNING.
    pub rows: Option<Rows>,
}

/// A command tag, rendered only when asked for (no allocation per execution).
#[derive(Clone, Copy, Debug)]
pub(super) enum Tag {
    Plain(&'static str),
    /// Followed by the row count (`UPDATE 3`).
    Counted(&'static str),
}

impl Tag {
    pub(super) fn render(self, n: u64) -> String {
        match self {
            Tag::Plain(t) => t.to_owned(),
            Tag::Counted(t) => format!("{t} {n}"),
        }
    }
}

/// A statement's command tag (`UPDATE 3`), rendered by `Display` into the
/// caller's buffer.
#[derive(Clone, Copy, Debug)]
pub struct CommandTag {
    pub(super) tag: Tag,
    pub(super) rows: u64,
}

impl CommandTag {
    /// Rows inserted/updated/deleted or returned.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

impl std::fmt::Display for CommandTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.tag {
            Tag::Plain(t) => f.write_str(t),
            Tag::Counted(t) => write!(f, "{t} {}", self.rows),
        }
    }
}

/// Result rows lent by [`Connection::execute_with`]: `rows` rows of `width`
/// values each, row-major.
#[derive(Clone, Copy, Debug)]
pub struct ResultRows<'a> {
    pub values: &'a [Value],
    pub width: usize,
    pub rows: usize,
}
