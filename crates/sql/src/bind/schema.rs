//! CREATE SCHEMA and DROP SCHEMA (see catalog/schemas.rs for what a
//! schema of pgtier's holds: nothing yet).

use sqlparser::ast::{self, ObjectName};

use super::{Binder, ident, parts};
use crate::error::{Result, SqlError};
use crate::plan::Plan;

fn schema_name(name: &ObjectName) -> Result<String> {
    match parts(name)?.as_slice() {
        [n] => Ok(n.clone()),
        _ => Err(SqlError::syntax(format!("improper qualified name (too many dotted names): {name}"))),
    }
}

impl Binder<'_> {
    pub(super) fn create_schema(&mut self, name: &ast::SchemaName, if_not_exists: bool) -> Result<Plan> {
        let (name, owner) = match name {
            ast::SchemaName::Simple(n) => (schema_name(n)?, None),
            ast::SchemaName::UnnamedAuthorization(role) => (ident(role), Some(ident(role))),
            ast::SchemaName::NamedAuthorization(n, role) => (schema_name(n)?, Some(ident(role))),
        };
        if name.starts_with("pg_") {
            return Err(SqlError::new("42939", format!("unacceptable schema name \"{name}\""))
                .with_detail("The prefix \"pg_\" is reserved for system schemas."));
        }
        self.need_kind("", crate::catalog::roles::ObjectKind::Database, crate::catalog::roles::Privs::CREATE);
        Ok(Plan::CreateSchema { name, owner, if_not_exists })
    }
}

/// DROP SCHEMA's names.
pub(super) fn drop_schema_names(names: &[ObjectName]) -> Result<Vec<String>> {
    names.iter().map(schema_name).collect()
}
