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
pub mod funcs;

use std::sync::Arc;

use pgtier_engine::{Column, TableSchema};

pub use crate::catalog::{Schema, SysCtx, SystemRel};
pub use crate::types::{Elem, RegKind};
pub use crate::plan::{SetOp, SetTree, TableFunc, VirtualSource};


/// A row shape from column names and types.
pub fn detached(name: &str, columns: Vec<(String, pgtier_engine::DataType)>) -> Arc<TableSchema> {
    Arc::new(TableSchema::detached(name, columns.into_iter().map(|(n, ty)| Column { name: n, ty, nullable: true, default: None, sequence: None, default_sql: None }).collect()))
}

/// The old path crates/server reads the wire type facts from.
pub mod catalog {
    /// (type oid, typmod, len): see [`crate::catalog::column_type_info`].
    pub fn column_type_info(ty: pgtier_engine::DataType) -> (i64, i32, i16) {
        let info = crate::catalog::column_type_info(ty);
        (info.type_oid, info.typmod, info.len)
    }
}
pub use crate::types;
