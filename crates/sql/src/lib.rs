//! pgtier SQL: parse (sqlparser, PostgreSQL dialect) → bind (names, types,
//! `$n` parameter types) → plan (access paths: primary-key lookup, ordered
//! index prefix/range scan, index nested-loop join) → execute on the
//! engine's typed transaction API, with PostgreSQL's semantics and SQLSTATEs.
//! See README.md for what is supported and the invariants.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod bind;
pub mod cache_predicate;
pub mod catalog;
mod clock;
pub mod depth;
pub mod dialect;
pub mod error;
pub mod exec;
pub mod explain;
pub mod expr;
pub mod names;
pub mod parse;
mod parse_sort;
mod parse_window;
pub mod plan;
pub mod planner;
pub mod plpgsql;
pub mod session;
pub mod settings;
pub mod tz;
pub mod value;

pub use error::{Result, SqlError, SqlNotice};
pub use pgtier_engine::{DataType, Database, Value};
pub use session::{Column, Connection, ExecResult, PreparedStatement, Row, Rows, stop_analytics};
