//! The binder's relation names: every relation name a statement writes
//! is resolved through one of these (over `catalog::search_path`).

use crate::bind::{Binder, Rel, Scope, parts};
use crate::catalog::search_path::{Target, check_new, creation_target, resolve, temp_target};
use crate::error::{Result, SqlError};
use crate::names::{is_temp_schema, split, stored};

impl Binder<'_> {
    /// The stored name of the existing relation (table, view, sequence or
    /// index) `name` refers to through the search path; None when there
    /// is none (a system relation counts as none: it is not stored).
    pub(crate) fn stored_relation(&self, name: &sqlparser::ast::ObjectName) -> Result<Option<String>> {
        let catalog = self.catalog;
        let exists = |k: &str| catalog.table_by_name(k).is_some() || catalog.index_by_name(k).is_some();
        Ok(match resolve(catalog, self.path, &parts(name)?, exists)? {
            Some(Target::Stored(k)) => Some(k),
            Some(Target::System(_)) | None => None,
        })
    }

    /// What `name` refers to among stored relations and system ones, as a
    /// query reads it: a schema that does not exist holds nothing (42P01
    /// for the caller, as PostgreSQL's parser reports it).
    pub(crate) fn target(&self, name: &sqlparser::ast::ObjectName) -> Result<Option<Target>> {
        let catalog = self.catalog;
        match resolve(catalog, self.path, &parts(name)?, |k| catalog.table_by_name(k).is_some()) {
            Err(e) if e.sqlstate == "3F000" => Ok(None),
            other => other,
        }
    }

    /// The stored name of the existing relation `name` refers to, or for a
    /// missing one a stored name no relation has (a statement with IF
    /// EXISTS goes on; without, the executor says it does not exist).
    pub(crate) fn relation_key(&self, name: &sqlparser::ast::ObjectName) -> Result<String> {
        if let Some(k) = self.stored_relation(name)? {
            return Ok(k);
        }
        Ok(match parts(name)?.as_slice() {
            [n] => stored(self.path.schemas.first().map_or("pg_catalog", String::as_str), n),
            [s, n] => stored(s, n),
            _ => name.to_string(),
        })
    }

    /// The stored name a relation created as `name` gets (in the
    /// temporary schema while a CREATE TEMP TABLE is bound).
    /// Making it needs CREATE on its schema (not on the temporary one).
    pub(crate) fn new_relation_key(&mut self, name: &sqlparser::ast::ObjectName) -> Result<String> {
        if self.creating_temp {
            return temp_target(self.path, &parts(name)?);
        }
        let key = creation_target(self.catalog, self.path, &parts(name)?)?;
        self.need_create_in(&key);
        Ok(key)
    }

    /// The stored name a temporary relation created as `name` gets.
    pub(crate) fn new_temp_key(&self, name: &sqlparser::ast::ObjectName) -> Result<String> {
        temp_target(self.path, &parts(name)?)
    }

    /// CREATE TEMP TABLE: the CREATE TABLE (or AS) bound with its name in
    /// the session's temporary schema, and its ON COMMIT action.
    pub(crate) fn create_temp_table(&mut self, c: &sqlparser::ast::CreateTable) -> Result<crate::plan::Plan> {
        use crate::plan::{OnCommit, Plan};
        let on_commit = match c.on_commit {
            None | Some(sqlparser::ast::OnCommit::PreserveRows) => OnCommit::PreserveRows,
            Some(sqlparser::ast::OnCommit::DeleteRows) => OnCommit::DeleteRows,
            Some(sqlparser::ast::OnCommit::Drop) => OnCommit::Drop,
        };
        let mut plain = c.clone();
        plain.temporary = false;
        plain.on_commit = None;
        self.creating_temp = true;
        let create = self.create_table(&plain);
        self.creating_temp = false;
        let create = create?;
        if let Plan::CreateTable { def, .. } | Plan::CreateTableAs { def, .. } = &create
            && def.foreign_keys.iter().any(|fk| !is_temp_schema(split(&fk.parent_table).0))
        {
            return Err(SqlError::new("42P16", "constraints on temporary tables may reference only temporary tables"));
        }
        Ok(Plan::CreateTemp { create: Box::new(create), on_commit })
    }

    /// A new index, sequence or constraint-named relation belonging to
    /// table `table` (stored name): in the table's schema, as PostgreSQL
    /// puts an index, whatever the search path says.
    pub(crate) fn beside(&self, table: &str, name: &sqlparser::ast::ObjectName) -> Result<String> {
        match parts(name)?.as_slice() {
            [n] => {
                check_new(n)?;
                Ok(stored(split(table).0, n))
            }
            [s, n] if s == split(table).0 => {
                check_new(n)?;
                Ok(stored(s, n))
            }
            [_, _] => Err(SqlError::new("42P16", "index and table must be in the same schema")
                .with_detail("pgtier creates an index in its table's schema.")),
            _ => Err(SqlError::new("42601", format!("improper qualified name (too many dotted names): {name}"))),
        }
    }
}

impl Scope<'_> {
    /// The FROM item `t.*` or `s.t.*` names: by reference name, and for
    /// `s.t` one whose relation is in schema `s`.
    pub(crate) fn qualified(&self, name: &sqlparser::ast::ObjectName) -> Result<&Rel> {
        let p = parts(name)?;
        let (schema, q) = match p.as_slice() {
            [q] => (None, q),
            [s, q] => (Some(s.as_str()), q),
            _ => return Err(SqlError::unsupported(format!("name {name}"))),
        };
        self.rels
            .iter()
            .find(|r| r.name == *q && schema.is_none_or(|s| r.schema_name() == Some(s)))
            .ok_or_else(|| SqlError::new("42P01", format!("missing FROM-clause entry for table \"{q}\"")))
    }
}
