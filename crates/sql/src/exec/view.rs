//! CREATE [OR REPLACE] VIEW and DROP VIEW, and the views DROP TABLE must
//! respect (2BP01 unless CASCADE, as PostgreSQL's dependencies make it).

use pgtier_engine::TableDef;

use super::Exec;
use crate::catalog::{ViewDef, column_types, dependent_views, is_view};
use crate::error::{Result, SqlError, SqlNotice};
use crate::value::{NUMERIC_ANY, type_name};

impl Exec<'_> {
    pub fn create_view(&mut self, def: &TableDef, replace: bool) -> Result<()> {
        self.ensure_temp_schema(&def.name)?;
        let cat = self.txn.catalog();
        let Some(old) = cat.table_by_name(&def.name).cloned() else {
            if cat.index_by_name(&def.name).is_some() {
                return Err(SqlError::new(
                    "42P07",
                    format!("relation \"{}\" already exists", crate::names::short(&def.name)),
                ));
            }
            self.txn.create_table(def)?;
            return self.record_owner(&def.name);
        };
        if !replace {
            return Err(SqlError::new(
                "42P07",
                format!("relation \"{}\" already exists", crate::names::short(&def.name)),
            ));
        }
        if !is_view(&old) {
            return Err(SqlError::new("42809", format!("\"{}\" is not a view", def.name)));
        }
        // PostgreSQL's rule for replacing: the old columns stay, in order,
        // with their names and types; new ones may only follow them.
        let old_cols = column_types(&old);
        let new_any = def.annotation.as_deref().and_then(ViewDef::decode).map(|d| d.numeric_any).unwrap_or_default();
        let new_cols = def
            .columns
            .iter()
            .enumerate()
            .map(|(k, c)| (&c.name, if new_any.contains(&k) { NUMERIC_ANY } else { c.ty }));
        if def.columns.len() < old_cols.len() {
            return Err(SqlError::new("42P16", "cannot drop columns from view"));
        }
        for ((oname, oty), (nname, nty)) in old_cols.iter().zip(new_cols) {
            if oname != nname {
                return Err(SqlError::new(
                    "42P16",
                    format!("cannot change name of view column \"{oname}\" to \"{nname}\""),
                )
                .with_hint("Use ALTER VIEW ... RENAME COLUMN ... to change name of view column instead."));
            }
            if *oty != nty {
                return Err(SqlError::new(
                    "42P16",
                    format!(
                        "cannot change data type of view column \"{oname}\" from {} to {}",
                        type_name(*oty),
                        type_name(nty)
                    ),
                ));
            }
        }
        if def.columns.len() == old_cols.len() {
            // Same row shape: only the query changes, and the view keeps its OID.
            self.txn.set_annotation(old.id, def.annotation.clone())?;
        } else {
            self.txn.drop_table(&def.name)?;
            self.txn.create_table(def)?;
        }
        Ok(())
    }

    pub fn drop_views(&mut self, names: &[String], if_exists: bool, cascade: bool) -> Result<()> {
        let mut pending: Vec<String> = Vec::new();
        for n in names {
            match self.txn.catalog().table_by_name(n) {
                Some(t) if is_view(t) => pending.push(n.clone()),
                Some(t) => {
                    let hint = if t.sequence.is_some() {
                        "Use DROP SEQUENCE to remove a sequence."
                    } else {
                        "Use DROP TABLE to remove a table."
                    };
                    return Err(SqlError::new("42809", format!("\"{n}\" is not a view")).with_hint(hint));
                }
                None if self.txn.catalog().index_by_name(n).is_some() => {
                    return Err(SqlError::new("42809", format!("\"{n}\" is not a view"))
                        .with_hint("Use DROP INDEX to remove an index."));
                }
                None if if_exists => self
                    .notices
                    .push(SqlNotice { sqlstate: "00000", message: format!("view \"{n}\" does not exist, skipping") }),
                None => return Err(SqlError::new("42P01", format!("view \"{n}\" does not exist"))),
            }
        }
        let cascaded = self.views_to_drop(&pending, "view", cascade)?;
        for n in cascaded.iter().chain(&pending) {
            if self.txn.catalog().table_by_name(n).is_some() {
                self.txn.drop_table(n)?;
                self.drop_rules_of(n)?;
            }
        }
        self.prune_acls()
    }

    /// The views that depend on `names` (directly or through other views)
    /// and are not among them: with `cascade` they are returned (and a
    /// NOTICE says so), otherwise the first one is PostgreSQL's 2BP01.
    pub(super) fn views_to_drop(&mut self, names: &[String], kind: &str, cascade: bool) -> Result<Vec<String>> {
        let cat = self.txn.catalog();
        let mut found: Vec<String> = Vec::new();
        let mut queue: Vec<(String, String)> = names.iter().map(|n| (n.clone(), kind.to_owned())).collect();
        while let Some((n, what)) = queue.pop() {
            for v in dependent_views(cat, &n) {
                if names.contains(&v.name) || found.contains(&v.name) {
                    continue;
                }
                if !cascade {
                    return Err(SqlError::new(
                        "2BP01",
                        format!("cannot drop {what} {n} because other objects depend on it"),
                    )
                    .with_detail(format!("view {} depends on {what} {n}", v.name))
                    .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
                }
                found.push(v.name.clone());
                queue.push((v.name.clone(), "view".to_owned()));
            }
        }
        match found.len() {
            0 => {}
            1 => self
                .notices
                .push(SqlNotice { sqlstate: "00000", message: format!("drop cascades to view {}", found[0]) }),
            k => self
                .notices
                .push(SqlNotice { sqlstate: "00000", message: format!("drop cascades to {k} other objects") }),
        }
        Ok(found)
    }
}
