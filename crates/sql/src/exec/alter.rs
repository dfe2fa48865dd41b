//! ALTER TABLE: the old rows read at the statement's snapshot, each new
//! row computed from one and checked with PostgreSQL's messages for
//! existing rows (NOT NULL, CHECK), then the engine's rewrite, which locks
//! the table exclusively and re-checks keys and foreign keys on insert.
//! That lock is taken before the rows are read (with a fresh snapshot), so
//! no write committed meanwhile is lost.

use pgtier_engine::Value;

use super::Exec;
use crate::error::{Result, SqlError};
use crate::expr::Env;
use crate::plan::AlterPlan;

impl Exec<'_> {
    pub fn alter_table(&mut self, p: &AlterPlan) -> Result<()> {
        self.notices.extend(p.notices.iter().cloned());
        let Some(old) = &p.table else { return Ok(()) };
        for b in &p.before {
            self.alter_table(b)?;
        }
        self.txn.lock_table_exclusive(old.id)?;
        let old_rows = self.table_rows(old)?;
        let env = Env { params: &[], now_micros: self.now_micros, outer: &[] };
        let def = &p.alter.def;
        let rowid = def.primary_key.is_empty();
        let mut rows = Vec::with_capacity(old_rows.len());
        for old_row in &old_rows {
            let mut row = Vec::with_capacity(p.fill.len() + 1);
            for e in &p.fill {
                row.push(e.eval(&env, self, old_row)?);
            }
            if let Some(c) = def.columns.iter().zip(&row).find(|(c, v)| !c.nullable && v.is_null()).map(|(c, _)| c) {
                return Err(SqlError::new(
                    "23502",
                    format!(
                        "column \"{}\" of relation \"{}\" contains null values",
                        c.name,
                        crate::names::short(&old.name)
                    ),
                ));
            }
            for check in &p.checks {
                if check.expr.eval_bool(&env, self, &row)? == Some(false) {
                    let mut e = SqlError::new(
                        "23514",
                        format!(
                            "check constraint \"{}\" of relation \"{}\" is violated by some row",
                            check.name,
                            crate::names::short(&old.name)
                        ),
                    );
                    e.constraint = Some(check.name.clone());
                    return Err(e);
                }
            }
            if rowid {
                row.push(Value::Null);
            }
            rows.push(row);
        }
        drop(old_rows);
        self.txn.alter_table(old.id, &p.alter, rows)?;
        self.drop_analytics_flag(&old.name)?;
        for seq in &p.drop_sequences {
            self.txn.drop_table(seq)?;
        }
        if p.alter.def.name != old.name {
            self.rename_relation_acl(&old.name, &p.alter.def.name)?;
        }
        if !p.drop_sequences.is_empty() {
            self.prune_acls()?;
        }
        Ok(())
    }

    /// A rewrite gives the table a new id and ends its columnar copy: its
    /// analytics flag goes too, with a NOTICE (set it again to rebuild).
    fn drop_analytics_flag(&mut self, table: &str) -> Result<()> {
        let Some(flag) = crate::catalog::analytics::flag_of(self.txn.catalog(), table).map(|f| f.name.clone()) else {
            return Ok(());
        };
        self.txn.drop_table(&flag)?;
        self.notices.push(crate::error::SqlNotice {
            sqlstate: "00000",
            message: format!(
                "analytics is off for relation \"{}\": ALTER TABLE rewrote it (SET ANALYTICS ON builds its copy again)",
                crate::names::short(table)
            ),
        });
        Ok(())
    }
}
