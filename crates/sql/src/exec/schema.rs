//! CREATE SCHEMA and DROP SCHEMA: a schema is an engine table without rows
//! (catalog/schemas.rs); it never holds objects, so RESTRICT and CASCADE
//! drop it alike.

use pgtier_engine::{ColumnDef, DataType, TableDef};

use super::Exec;
use crate::catalog::{namespace_name, schema_annotation, schema_table_name, user_schema_named, NS_INFORMATION_SCHEMA, NS_PG_CATALOG, NS_PG_TOAST, NS_PUBLIC};
use crate::error::{Result, SqlError, SqlNotice};

fn builtin(name: &str) -> bool {
    [NS_PG_CATALOG, NS_PUBLIC, NS_INFORMATION_SCHEMA, NS_PG_TOAST].into_iter().any(|o| namespace_name(o) == Some(name))
}

impl Exec<'_> {
    pub fn create_schema(&mut self, name: &str, owner: Option<&str>, if_not_exists: bool) -> Result<()> {
        let user = self.settings.get("session_authorization").cloned().unwrap_or_else(|| "postgres".into());
        // The session's user is the one role there is.
        let owner = match owner {
            Some(o) if o != user && o != "current_user" && o != "session_user" => return Err(SqlError::new("42704", format!("role \"{o}\" does not exist"))),
            _ => user,
        };
        if builtin(name) || user_schema_named(self.txn.catalog(), name).is_some() {
            if if_not_exists {
                self.notices.push(SqlNotice { sqlstate: "42P06", message: format!("schema \"{name}\" already exists, skipping") });
                return Ok(());
            }
            return Err(SqlError::new("42P06", format!("schema \"{name}\" already exists")));
        }
        // The engine wants a column; this one never holds a value.
        let mut def = TableDef::new(schema_table_name(name), vec![ColumnDef::new("nspname", DataType::Text)], &[]);
        def.annotation = Some(schema_annotation(&owner));
        self.txn.create_table(&def)?;
        Ok(())
    }

    pub fn drop_schemas(&mut self, names: &[String], if_exists: bool) -> Result<()> {
        let mut pending = Vec::new();
        for n in names {
            if builtin(n) {
                return Err(SqlError::unsupported(format!("DROP SCHEMA {n}")));
            }
            if user_schema_named(self.txn.catalog(), n).is_some() {
                pending.push(schema_table_name(n));
            } else if if_exists {
                self.notices.push(SqlNotice { sqlstate: "00000", message: format!("schema \"{n}\" does not exist, skipping") });
            } else {
                return Err(SqlError::new("3F000", format!("schema \"{n}\" does not exist")));
            }
        }
        for t in pending {
            self.txn.drop_table(&t)?;
        }
        Ok(())
    }
}

impl Exec<'_> {
    /// PostgreSQL creates an unqualified relation in the first schema of the
    /// search path that exists; pgtier only in public. Where PostgreSQL
    /// would put it elsewhere, its error, or 0A000 for a schema of CREATE
    /// SCHEMA's, rather than a relation in the wrong place.
    pub(super) fn check_creation_schema(&self, name: &str) -> Result<()> {
        let cat = self.txn.catalog();
        match crate::settings::search_path_with(self.settings, |s| user_schema_named(cat, s).is_some()).into_iter().next() {
            Some(s) if s == "public" => Ok(()),
            Some(s) if s == "pg_catalog" => Err(SqlError::new("42501", format!("permission denied to create \"pg_catalog.{name}\""))
                .with_detail("System catalog modifications are currently disallowed.")),
            Some(s) => Err(SqlError::unsupported(format!("creating a relation in schema \"{s}\" (first on search_path; pgtier keeps relations in public)"))),
            None => Err(SqlError::new("3F000", "no schema has been selected to create in")),
        }
    }
}
