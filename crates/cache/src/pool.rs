//! The cache's pooled PostgreSQL connections for short exchanges made on an
//! application's behalf inside its statement: a dynamic load's reads and
//! the reservation of sequence values. At most `[backend] pool_size` idle
//! connections are kept; each remembers the statements it prepared.

use std::collections::HashMap;

use parking_lot::Mutex;
use pgtier_backend::{ConnectParams, connect_backend};
use postgres::{Client, Statement};

use crate::error::CacheError;

/// A PostgreSQL connection kept for reuse, with its prepared statements.
pub(crate) struct Pooled {
    pub client: Client,
    statements: HashMap<String, Statement>,
}

impl Pooled {
    /// `sql` prepared on this connection (once per connection).
    pub fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

pub(crate) struct Pool {
    backend: Option<ConnectParams>,
    idle: Mutex<Vec<Pooled>>,
}

impl Pool {
    pub fn new(backend: Option<ConnectParams>) -> Pool {
        Pool { backend, idle: Mutex::new(Vec::new()) }
    }

    /// Runs `work` on an idle connection, or a new one (08001 without
    /// `[backend]`). The connection goes back to the pool only when `work`
    /// succeeded: one that failed may have broken mid-exchange, so the next
    /// caller connects anew. An idle connection PostgreSQL closed meanwhile
    /// (a restart, a terminated backend) gets `work` once more on a new
    /// connection, so the first caller after an outage does not see the
    /// stale connection's error; `work` must bear running twice.
    pub fn with<T>(&self, mut work: impl FnMut(&mut Pooled) -> Result<T, CacheError>) -> Result<T, CacheError> {
        let idle = self.idle.lock().pop();
        let reused = idle.is_some();
        let mut pooled = match idle {
            Some(pooled) => pooled,
            None => self.connect()?,
        };
        let mut result = work(&mut pooled);
        if reused && result.as_ref().is_err_and(|error| lost(error, &pooled)) {
            pooled = self.connect()?;
            result = work(&mut pooled);
        }
        if result.is_ok() {
            let keep = self.backend.as_ref().map_or(1, |params| params.pool_size.max(1));
            let mut idle = self.idle.lock();
            if idle.len() < keep {
                idle.push(pooled);
            }
        }
        result
    }

    fn connect(&self) -> Result<Pooled, CacheError> {
        let params = self.backend.as_ref().ok_or(CacheError::NoBackend)?;
        Ok(Pooled { client: connect_backend(params)?, statements: HashMap::new() })
    }
}

/// The connection is gone, not the request refused: closed, or PostgreSQL
/// ending the session (57P01 at a shutdown) or the link (class 08).
fn lost(error: &CacheError, pooled: &Pooled) -> bool {
    let sqlstate = error.sqlstate();
    pooled.client.is_closed() || sqlstate.starts_with("08") || sqlstate.starts_with("57P")
}
