//! ANALYZE and VACUUM: pgtier keeps no statistics and no dead rows, and
//! its answers depend on neither, so both are accepted without effect
//! once the names they give are checked as PostgreSQL checks them. Also
//! pgtier's `ALTER TABLE t SET ANALYTICS ON | OFF` (session/analytics.rs).

use std::sync::Arc;

use sqlparser::ast::{self, ObjectName};

use super::{Binder, ident};
use crate::error::{Result, SqlError};
use crate::plan::Plan;
use pgtier_engine::TableSchema;

impl Binder<'_> {
    /// ANALYZE, VACUUM; 0A000 for any other statement the binder has no
    /// case for.
    pub(super) fn maintenance(&mut self, stmt: &ast::Statement) -> Result<Plan> {
        match stmt {
            ast::Statement::Analyze(a) => self.analyze(a),
            ast::Statement::Vacuum(v) => self.vacuum(v),
            other => Err(SqlError::unsupported(super::statement_kind(other))),
        }
    }

    /// `ANALYZE [table [(columns)]]`.
    fn analyze(&mut self, a: &ast::Analyze) -> Result<Plan> {
        if a.partitions.is_some() || a.for_columns || a.cache_metadata || a.noscan || a.compute_statistics {
            return Err(SqlError::syntax("this ANALYZE form is not PostgreSQL's"));
        }
        if a.has_table_keyword {
            return Err(SqlError::syntax("syntax error at or near \"TABLE\""));
        }
        if let Some(name) = &a.table_name {
            let t = self.maintained(name, "analyze")?;
            for c in &a.columns {
                let c = ident(c);
                if t.visible_columns().iter().all(|col| col.name != c) {
                    return Err(SqlError::new(
                        "42703",
                        format!("column \"{c}\" of relation \"{}\" does not exist", crate::names::short(&t.name)),
                    ));
                }
            }
        }
        Ok(Plan::Noop { tag: "ANALYZE" })
    }

    /// `VACUUM [FULL] [FREEZE] [ANALYZE] [table]` as dialect.rs reads it;
    /// the session refuses it inside a transaction block (25001).
    fn vacuum(&mut self, v: &ast::VacuumStatement) -> Result<Plan> {
        if v.sort_only || v.delete_only || v.reindex || v.recluster || v.threshold.is_some() || v.boost {
            return Err(SqlError::syntax("this VACUUM form is not PostgreSQL's"));
        }
        if let Some(name) = &v.table_name {
            self.maintained(name, "vacuum")?;
        }
        Ok(Plan::Noop { tag: "VACUUM" })
    }

    /// The stored table `name` (42P01 when there is none). PostgreSQL
    /// skips a view or sequence with a WARNING; pgtier refuses it.
    fn maintained(&mut self, name: &ObjectName, verb: &str) -> Result<Arc<TableSchema>> {
        let t = self.relation(name)?;
        if crate::catalog::is_view(&t) || t.sequence.is_some() {
            return Err(SqlError::unsupported(format!("{verb} of a view or sequence")));
        }
        Ok(t)
    }

    /// `ALTER TABLE [IF EXISTS] t SET ANALYTICS ON | OFF` as dialect.rs
    /// spells it: Some(on) for that statement.
    pub(super) fn analytics_switch(a: &ast::AlterTable) -> Option<bool> {
        match a.operations.as_slice() {
            [ast::AlterTableOperation::SetTblProperties { table_properties }] => match table_properties.as_slice() {
                [
                    ast::SqlOption::KeyValue {
                        key,
                        value: ast::Expr::Value(ast::ValueWithSpan { value: ast::Value::Boolean(on), .. }),
                    },
                ] if key.quote_style.is_none() && key.value == crate::dialect::SET_ANALYTICS_KEY => Some(*on),
                _ => None,
            },
            _ => None,
        }
    }

    /// The table's owner only; a relation that cannot have a columnar copy
    /// is refused here (and again when it runs: the session re-reads the
    /// catalog outside any transaction).
    pub(super) fn set_analytics(&mut self, a: &ast::AlterTable, on: bool) -> Result<Plan> {
        if a.if_exists && self.stored_relation(&a.name)?.is_none() {
            let name = super::parts(&a.name)?.pop().unwrap_or_default();
            let notice = crate::error::SqlNotice {
                sqlstate: "00000",
                message: format!("relation \"{name}\" does not exist, skipping"),
            };
            return Ok(Plan::AlterTable(Box::new(crate::plan::AlterPlan::skipped(notice))));
        }
        let table = self.relation(&a.name)?;
        if let Some(refused) = crate::catalog::analytics::refusal(&table) {
            return Err(refused);
        }
        self.need_owner(&table);
        Ok(Plan::SetAnalytics { table: table.name.clone(), on })
    }
}
