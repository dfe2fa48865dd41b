//! CREATE TYPE ... AS (...), CREATE DOMAIN, DROP TYPE and DROP DOMAIN: a
//! type is an engine table without rows (catalog/user_types.rs). Only its
//! owner (or a superuser) drops it (42501).

use super::Exec;
use crate::catalog::user_types::{TypeDef, UserType, type_table_def, user_type_named, user_types};
use crate::error::{Result, SqlError, SqlNotice};

impl Exec<'_> {
    pub fn create_type(&mut self, def: &TypeDef) -> Result<()> {
        let catalog = self.txn.catalog();
        // Every table has a row type of its name in PostgreSQL.
        let relation = catalog.table_by_name(&crate::names::stored("public", &def.name)).is_some();
        if relation || user_type_named(catalog, &def.name).is_some() {
            return Err(SqlError::new("42710", format!("type \"{}\" already exists", def.name)));
        }
        // The attributes' types must still exist (a concurrent DROP).
        for a in def.doc.attr_types.iter().flatten() {
            if user_type_named(catalog, &a.name).is_none() {
                return Err(SqlError::new("42704", format!("type \"{}\" does not exist", a.name)));
            }
        }
        let owner = crate::catalog::roles::current_role(self.settings).to_owned();
        self.txn.create_table(&type_table_def(def, &owner)?)?;
        Ok(())
    }

    pub fn drop_types(&mut self, names: &[String], if_exists: bool, cascade: bool, domain: bool) -> Result<()> {
        let mut found: Vec<UserType> = Vec::new();
        for name in names {
            let Some(t) = user_type_named(self.txn.catalog(), name) else {
                if if_exists {
                    self.notices.push(SqlNotice {
                        sqlstate: "00000",
                        message: format!("type \"{name}\" does not exist, skipping"),
                    });
                    continue;
                }
                return Err(SqlError::new("42704", format!("type \"{name}\" does not exist")));
            };
            if domain && !t.is_domain() {
                return Err(SqlError::new("42809", format!("\"{name}\" is not a domain")));
            }
            let user = crate::catalog::roles::current_role(self.settings).to_owned();
            if t.doc.owner != user && !crate::catalog::roles::session_is_superuser(self.txn.catalog(), self.settings)? {
                return Err(SqlError::new("42501", format!("must be owner of type {name}")));
            }
            found.push(t);
        }
        for t in &found {
            self.refuse_dependents(t, &found, cascade)?;
        }
        for t in found {
            if self.txn.catalog().table(t.table.id).is_some() {
                self.txn.drop_table(&t.table.name)?;
            }
        }
        Ok(())
    }

    /// 2BP01 when a type not dropped with it names `t` (an attribute of a
    /// composite type); CASCADE, which would drop those attributes, 0A000.
    fn refuse_dependents(&self, t: &UserType, dropped: &[UserType], cascade: bool) -> Result<()> {
        let mut lines = Vec::new();
        for other in user_types(self.txn.catalog()) {
            if dropped.iter().any(|d| d.oid == other.oid) {
                continue;
            }
            for (k, a) in other.uses().filter(|(_, a)| a.name == t.name) {
                let attr = other.columns.get(k).map_or("", |(n, _)| n.as_str());
                let ty = if a.array { format!("{}[]", t.name) } else { t.name.clone() };
                lines.push(format!("column {attr} of composite type {} depends on type {ty}", other.name));
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        if cascade {
            return Err(SqlError::unsupported("DROP TYPE ... CASCADE of a type other types use"));
        }
        Err(SqlError::new("2BP01", format!("cannot drop type {} because other objects depend on it", t.name))
            .with_detail(lines.join("\n"))
            .with_hint("Use DROP ... CASCADE to drop the dependent objects too."))
    }
}
