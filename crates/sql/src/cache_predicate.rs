//! A READONLY cache group's WHERE, evaluated on rows arriving from
//! PostgreSQL by autorefresh (the cache crate knows no SQL; it asks this
//! through [`pgtier_cache::PredicateCompiler`]).
//!
//! The predicate is bound once as `SELECT (predicate) FROM (VALUES ($1::t1,
//! ...)) AS root(c1, ...)`, so it sees the root table's columns by the same
//! names (qualified or not) and types, and is evaluated with PostgreSQL's
//! semantics by the same executor as any query: NULL is not a match.

use pgtier_cache::{PredicateCompiler, RowTest};
use pgtier_engine::{Database, Value};

use crate::catalog::quote_ident;
use crate::session::{Connection, PreparedStatement};

/// The compiler the server installs on its cache.
pub struct SqlPredicates {
    db: Database,
}

impl SqlPredicates {
    pub fn new(db: Database) -> SqlPredicates {
        SqlPredicates { db }
    }
}

struct CompiledPredicate {
    connection: Connection,
    statement: PreparedStatement,
}

impl PredicateCompiler for SqlPredicates {
    fn compile(&self, table: &str, predicate: &str) -> Result<Box<dyn RowTest>, String> {
        let catalog = self.db.catalog();
        let schema = catalog.table_by_name(table).ok_or_else(|| format!("table \"{table}\" is not in the cache"))?;
        let params: Vec<String> =
            schema.columns.iter().enumerate().map(|(i, c)| format!("${}::{}", i + 1, c.ty.pg_name())).collect();
        let names: Vec<String> = schema.columns.iter().map(|c| quote_ident(&c.name)).collect();
        let sql = format!(
            "SELECT ({predicate}) FROM (VALUES ({})) AS {}({})",
            params.join(", "),
            quote_ident(table),
            names.join(", ")
        );
        let mut connection = Connection::new(self.db.clone());
        let statement = connection.prepare(&sql).map_err(|e| e.to_string())?;
        Ok(Box::new(CompiledPredicate { connection, statement }))
    }
}

impl RowTest for CompiledPredicate {
    fn matches(&mut self, row: &[Value]) -> Result<bool, String> {
        let result = self
            .connection
            .query_with(&self.statement, row, |values, _| matches!(values.first(), Some(Value::Bool(true))));
        // A failed evaluation leaves the session's implicit transaction aborted: end it.
        if result.is_err() {
            let _ = self.connection.execute_sql("ROLLBACK");
        }
        result.map_err(|e| e.to_string())
    }
}
