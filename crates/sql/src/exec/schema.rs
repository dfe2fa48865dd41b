//! CREATE SCHEMA and DROP SCHEMA: a schema is an engine table without rows
//! (catalog/schemas.rs); its relations are the stored names it prefixes
//! (crate::names). DROP SCHEMA refuses a schema holding any (2BP01) unless
//! CASCADE, which drops them first.

use pgtier_engine::{ColumnDef, DataType, TableDef};

use super::Exec;
use crate::catalog::{
    NS_INFORMATION_SCHEMA, NS_PG_CATALOG, NS_PG_TOAST, NS_PUBLIC, is_schema, is_view, namespace_name,
    schema_annotation, schema_table_name, user_schema_named,
};
use crate::error::{Result, SqlError, SqlNotice};

fn builtin(name: &str) -> bool {
    [NS_PG_CATALOG, NS_PUBLIC, NS_INFORMATION_SCHEMA, NS_PG_TOAST].into_iter().any(|o| namespace_name(o) == Some(name))
}

impl Exec<'_> {
    pub fn create_schema(&mut self, name: &str, owner: Option<&str>, if_not_exists: bool) -> Result<()> {
        crate::catalog::search_path::check_new(name)?;
        let user = crate::catalog::roles::current_role(self.settings).to_owned();
        // AUTHORIZATION names an existing role the creator is a member of.
        let owner = match owner {
            Some(o) if o != user && o != "current_user" && o != "session_user" => {
                let doc = crate::catalog::roles::AuthDoc::read(self.txn.catalog())?.map(|(_, d)| d);
                let Some(doc) = doc.filter(|d| d.roles.contains_key(o)) else {
                    return Err(SqlError::new("42704", format!("role \"{o}\" does not exist")));
                };
                if !crate::catalog::roles::superuser(self.settings.auth(), Some(&doc), &user)
                    && !doc.is_member(&user, o)
                {
                    return Err(SqlError::new("42501", format!("must be member of role \"{o}\"")));
                }
                o.to_owned()
            }
            _ => user,
        };
        if builtin(name) || user_schema_named(self.txn.catalog(), name).is_some() {
            if if_not_exists {
                self.notices.push(SqlNotice {
                    sqlstate: "42P06",
                    message: format!("schema \"{name}\" already exists, skipping"),
                });
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

    pub fn drop_schemas(&mut self, names: &[String], if_exists: bool, cascade: bool) -> Result<()> {
        let mut pending = Vec::new();
        for n in names {
            if builtin(n) {
                return Err(SqlError::unsupported(format!("DROP SCHEMA {n}")));
            }
            if user_schema_named(self.txn.catalog(), n).is_some() {
                pending.push(schema_table_name(n));
            } else if if_exists {
                self.notices
                    .push(SqlNotice { sqlstate: "00000", message: format!("schema \"{n}\" does not exist, skipping") });
            } else {
                return Err(SqlError::new("3F000", format!("schema \"{n}\" does not exist")));
            }
        }
        let present: Vec<String> =
            names.iter().filter(|n| user_schema_named(self.txn.catalog(), n).is_some()).cloned().collect();
        for n in &present {
            self.drop_contents(n, cascade)?;
        }
        for t in pending {
            self.txn.drop_table(&t)?;
        }
        self.prune_acls()
    }

    /// Drops the relations of schema `schema` (views, then tables with
    /// their indexes and owned sequences, then other sequences); without
    /// `cascade`, 2BP01 when there is any.
    fn drop_contents(&mut self, schema: &str, cascade: bool) -> Result<()> {
        let cat = self.txn.catalog();
        let mut views = Vec::new();
        let mut tables = Vec::new();
        let mut sequences = Vec::new();
        for t in cat.tables() {
            if is_schema(t) || crate::names::split(&t.name).0 != schema {
                continue;
            }
            let list = if is_view(t) {
                &mut views
            } else if t.sequence.is_some() {
                &mut sequences
            } else {
                &mut tables
            };
            list.push(t.name.clone());
        }
        let count = views.len() + tables.len() + sequences.len();
        if count == 0 {
            return Ok(());
        }
        if !cascade {
            let first = views
                .first()
                .map(|v| format!("view {v}"))
                .or_else(|| tables.first().map(|t| format!("table {t}")))
                .or_else(|| sequences.first().map(|s| format!("sequence {s}")))
                .unwrap_or_default();
            return Err(SqlError::new(
                "2BP01",
                format!("cannot drop schema {schema} because other objects depend on it"),
            )
            .with_detail(format!("{first} depends on schema {schema}"))
            .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
        }
        let before = self.notices.len();
        self.drop_views(&views, true, true)?;
        self.drop_tables(&tables, true, false, true)?;
        // Sequences a dropped table owned went with it.
        let left: Vec<String> =
            sequences.into_iter().filter(|s| self.txn.catalog().table_by_name(s).is_some()).collect();
        self.drop_tables(&left, true, true, true)?;
        self.notices.truncate(before);
        let message = if count == 1 {
            format!(
                "drop cascades to {}",
                views
                    .first()
                    .map(|v| format!("view {v}"))
                    .or_else(|| tables.first().map(|t| format!("table {t}")))
                    .unwrap_or_else(|| format!("sequence {}", left.first().map_or("", String::as_str)))
            )
        } else {
            format!("drop cascades to {count} other objects")
        };
        self.notices.push(SqlNotice { sqlstate: "00000", message });
        Ok(())
    }
}

impl Exec<'_> {
    /// A temporary relation's schema (`pg_temp_N`), made on first use in
    /// the creating transaction.
    pub(super) fn ensure_temp_schema(&mut self, name: &str) -> Result<()> {
        let schema = crate::names::split(name).0;
        if crate::names::is_temp_schema(schema) && user_schema_named(self.txn.catalog(), schema).is_none() {
            self.create_schema(schema, None, false)?;
        }
        Ok(())
    }
}
