//! What drivers and psql ask at connect and for metadata: the pg_catalog
//! and information_schema relations (generated from the engine catalog when
//! a statement reads them), the system functions, and the relation kinds
//! that are not stored tables: subqueries and set operations in FROM, VALUES
//! and table functions (generate_series, unnest, pg_partition_ancestors).
//!
//! Hooks elsewhere: the binder resolves a name here before it looks for a
//! user table (pg_catalog is implicitly first on PostgreSQL's search path);
//! such a FROM item becomes a level with [`crate::plan::Access::Virtual`]
//! whose rows [`Exec::virtual_rows`] produces; `Func::Sys` calls evaluate
//! through [`funcs::eval`] with the catalog and settings the executor lends
//! ([`crate::expr::SubqueryRunner::system`]). Ordinary tables never take
//! these paths, so the point-lookup path is unchanged.

pub mod binder;
pub mod catalog;
pub mod funcs;
pub mod types;

use std::collections::HashMap;
use std::sync::Arc;

use pgtier_engine::{Catalog, Column, TableSchema, Value};

pub use catalog::{Schema, SystemRel};
pub use funcs::{SeqFunc, SysFunc};
pub use types::{Elem, RegKind};

use crate::error::{Result, SqlError};
use crate::exec::{Exec, GroupKey};
use crate::expr::{Env, Expr, SubqueryRunner};
use crate::plan::SelectPlan;

/// What the system functions and relations read: the statement's catalog
/// snapshot and the session's settings.
pub struct SysCtx<'a> {
    pub catalog: &'a Catalog,
    pub settings: &'a mut HashMap<String, String>,
}

/// Rows that do not come from an engine table.
#[derive(Clone, Debug, PartialEq)]
pub enum VirtualSource {
    System(SystemRel),
    /// A subquery, VALUES list or set operation in FROM (or a top-level set
    /// operation, planned as a query over it).
    Query(SetTree),
    /// A set-returning function in FROM; its arguments may read the
    /// relations before it (PostgreSQL's implicit LATERAL).
    Function { func: TableFunc, args: Vec<Expr>, ordinality: bool },
}

#[derive(Clone, Debug, PartialEq)]
pub enum SetTree {
    /// Its first `visible` projection columns, already cast to the set's column types.
    Select(Box<SelectPlan>),
    Values(Vec<Vec<Expr>>),
    Op { op: SetOp, all: bool, left: Box<SetTree>, right: Box<SetTree> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Union,
    Intersect,
    Except,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFunc {
    GenerateSeries,
    Unnest(Elem),
    /// pgtier has no partitioning: like PostgreSQL for a relation that is
    /// not a partition, no rows.
    PartitionAncestors,
}

/// A system relation by (optional) schema and name, as PostgreSQL resolves
/// it: unqualified names look in pg_catalog first, information_schema only
/// when named. Err for a schema that does not exist.
pub fn resolve(schema: Option<&str>, name: &str) -> Result<Option<SystemRel>> {
    Ok(match schema {
        None | Some("pg_catalog") => SystemRel::find(Schema::PgCatalog, name),
        Some("information_schema") => SystemRel::find(Schema::InformationSchema, name),
        Some("public") => None,
        Some(s) => return Err(SqlError::new("3F000", format!("schema \"{s}\" does not exist"))),
    })
}

/// The row shape of a system relation.
pub fn schema_of(rel: SystemRel) -> Arc<TableSchema> {
    Arc::new(TableSchema::detached(rel.def().name, rel.schema_columns()))
}

/// A row shape from column names and types.
pub fn detached(name: &str, columns: Vec<(String, pgtier_engine::DataType)>) -> Arc<TableSchema> {
    Arc::new(TableSchema::detached(name, columns.into_iter().map(|(n, ty)| Column { name: n, ty, nullable: true, default: None, sequence: None, default_sql: None }).collect()))
}

impl Exec<'_> {
    /// Appends the rows of a virtual level (flat) for the joined `row` so far.
    pub(crate) fn virtual_rows(&mut self, source: &VirtualSource, env: &Env<'_>, row: &[Value], out: &mut Vec<Value>) -> Result<()> {
        match source {
            VirtualSource::System(rel) => {
                let Some(ctx) = self.system() else { return Ok(()) };
                catalog::rows(*rel, &ctx, out);
            }
            VirtualSource::Query(tree) => {
                for r in self.set_rows(tree, env)? {
                    out.extend(r);
                }
            }
            VirtualSource::Function { func, args, ordinality } => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(a.eval(env, self, row)?);
                }
                let items: Vec<Value> = match func {
                    _ if vals.iter().any(Value::is_null) => Vec::new(),
                    TableFunc::GenerateSeries => {
                        let (lo, hi) = (vals[0].as_i64().unwrap_or(0), vals[1].as_i64().unwrap_or(0));
                        let step = vals.get(2).and_then(Value::as_i64).unwrap_or(1);
                        if step == 0 {
                            return Err(SqlError::new("22023", "step size cannot equal zero"));
                        }
                        let n = if (step > 0 && hi < lo) || (step < 0 && hi > lo) { 0 } else { (hi - lo) / step + 1 };
                        if n > 100_000_000 {
                            return Err(SqlError::new("54000", "generate_series: too many rows"));
                        }
                        let int8 = matches!(vals[0], Value::Int8(_)) || matches!(vals[1], Value::Int8(_));
                        (0..n).map(|k| lo + k * step).map(|v| if int8 { Value::Int8(v) } else { Value::Int4(i32::try_from(v).unwrap_or(0)) }).collect()
                    }
                    TableFunc::Unnest(e) => types::array_values(vals[0].as_str().unwrap_or(""), *e)?,
                    TableFunc::PartitionAncestors => Vec::new(),
                };
                for (k, v) in items.into_iter().enumerate() {
                    out.push(v);
                    if *ordinality {
                        out.push(Value::Int8(i64::try_from(k + 1).unwrap_or(i64::MAX)));
                    }
                }
            }
        }
        Ok(())
    }

    fn set_rows(&mut self, tree: &SetTree, env: &Env<'_>) -> Result<Vec<Vec<Value>>> {
        Ok(match tree {
            SetTree::Select(plan) => {
                let mut rows = self.select_rows(plan, env.params, env.outer)?;
                for r in &mut rows {
                    r.truncate(plan.visible);
                }
                rows
            }
            SetTree::Values(rows) => {
                let mut out = Vec::with_capacity(rows.len());
                for r in rows {
                    let mut vals = Vec::with_capacity(r.len());
                    for e in r {
                        vals.push(e.eval(env, self, &[])?);
                    }
                    out.push(vals);
                }
                out
            }
            SetTree::Op { op, all, left, right } => {
                let l = self.set_rows(left, env)?;
                let r = self.set_rows(right, env)?;
                combine(*op, *all, l, r)
            }
        })
    }
}

/// UNION / INTERSECT / EXCEPT [ALL] on rows, NULLs equal (SQL's "not distinct").
fn combine(op: SetOp, all: bool, left: Vec<Vec<Value>>, right: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    let distinct = |rows: Vec<Vec<Value>>| -> Vec<Vec<Value>> {
        let mut seen = std::collections::HashSet::new();
        rows.into_iter().filter(|r| seen.insert(GroupKey(r.clone()))).collect()
    };
    match op {
        SetOp::Union => {
            let mut rows = left;
            rows.extend(right);
            if all { rows } else { distinct(rows) }
        }
        SetOp::Intersect | SetOp::Except => {
            let mut counts: HashMap<GroupKey, usize> = HashMap::new();
            for r in right {
                *counts.entry(GroupKey(r)).or_insert(0) += 1;
            }
            let left = if all { left } else { distinct(left) };
            let mut out = Vec::new();
            for r in left {
                let key = GroupKey(r);
                let n = counts.get_mut(&key);
                let present = n.as_ref().is_some_and(|c| **c > 0);
                if all && let Some(c) = n {
                    *c = c.saturating_sub(1);
                }
                if present == (op == SetOp::Intersect) {
                    out.push(key.0);
                }
            }
            out
        }
    }
}
