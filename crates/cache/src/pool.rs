//! The cache's pooled PostgreSQL connections for short exchanges made on an
//! application's behalf inside its statement: a dynamic load's reads and
//! the reservation of sequence values. At most `[backend] pool_size` idle
//! connections are kept; each remembers the statements it prepared.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
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
    state: Mutex<PoolState>,
    /// Signalled when a connection comes back (or a checkout gives up).
    returned: Condvar,
}

#[derive(Default)]
struct PoolState {
    idle: Vec<Pooled>,
    /// Connections handed out and not back yet.
    out: usize,
}

/// How long a caller waits for one of the `pool_size` connections before
/// it opens one more. A load holds its connection for a round trip and an
/// insert (about a millisecond), so a burst of misses beyond `pool_size`
/// is served by waiting, where connecting anew for each (a PostgreSQL
/// backend forked, authenticated, its catalog caches and the statement
/// prepared and planned again) cost PostgreSQL more than the loads did:
/// 55 new backends a second under 8 sessions. The bound keeps a caller
/// that needs a second connection while holding one (a load whose insert
/// misses into another group) from waiting on itself for long.
const CHECKOUT_WAIT: Duration = Duration::from_millis(100);

impl Pool {
    pub fn new(backend: Option<ConnectParams>) -> Pool {
        Pool { backend, state: Mutex::new(PoolState::default()), returned: Condvar::new() }
    }

    /// Runs `work` on an idle connection, or a new one (08001 without
    /// `[backend]`). The connection goes back to the pool only when `work`
    /// succeeded: one that failed may have broken mid-exchange, so the next
    /// caller connects anew. An idle connection PostgreSQL closed meanwhile
    /// (a restart, a terminated backend) gets `work` once more on a new
    /// connection, so the first caller after an outage does not see the
    /// stale connection's error; `work` must bear running twice. While
    /// `pool_size` connections are out, a caller waits for one (at most
    /// [`CHECKOUT_WAIT`], then it connects anew).
    pub fn with<T>(&self, mut work: impl FnMut(&mut Pooled) -> Result<T, CacheError>) -> Result<T, CacheError> {
        let (mut pooled, reused) = self.checkout()?;
        let mut result = work(&mut pooled);
        if reused && result.as_ref().is_err_and(|error| lost(error, &pooled)) {
            pooled = match self.connect() {
                Ok(pooled) => pooled,
                Err(error) => {
                    self.check_in(None);
                    return Err(error);
                }
            };
            result = work(&mut pooled);
        }
        self.check_in(result.is_ok().then_some(pooled));
        result
    }

    /// An idle connection (true), or a new one (false).
    fn checkout(&self) -> Result<(Pooled, bool), CacheError> {
        let keep = self.keep();
        let deadline = Instant::now() + CHECKOUT_WAIT;
        let mut state = self.state.lock();
        loop {
            if let Some(pooled) = state.idle.pop() {
                state.out += 1;
                return Ok((pooled, true));
            }
            if state.out < keep || self.returned.wait_until(&mut state, deadline).timed_out() {
                break;
            }
        }
        state.out += 1;
        drop(state);
        self.connect().map(|pooled| (pooled, false)).inspect_err(|_| self.check_in(None))
    }

    /// A connection comes back: kept idle when there is room (`Some`), or
    /// gone (`None`, or no room).
    fn check_in(&self, pooled: Option<Pooled>) {
        let keep = self.keep();
        let mut state = self.state.lock();
        debug_assert!(state.out > 0, "a connection checked in that was not out");
        state.out = state.out.saturating_sub(1);
        if let Some(pooled) = pooled
            && state.idle.len() < keep
        {
            state.idle.push(pooled);
        }
        drop(state);
        self.returned.notify_one();
    }

    fn keep(&self) -> usize {
        self.backend.as_ref().map_or(1, |params| params.pool_size.max(1))
    }

    fn connect(&self) -> Result<Pooled, CacheError> {
        let params = self.backend.as_ref().ok_or(CacheError::NoBackend)?;
        let mut client = connect_backend(params)?;
        client.batch_execute(pgtier_backend::connect::GENERIC_PLANS).map_err(|e| crate::error::connection_error(&e))?;
        Ok(Pooled { client, statements: HashMap::new() })
    }
}

/// The connection is gone, not the request refused: closed, or PostgreSQL
/// ending the session (57P01 at a shutdown) or the link (class 08).
fn lost(error: &CacheError, pooled: &Pooled) -> bool {
    let sqlstate = error.sqlstate();
    pooled.client.is_closed() || sqlstate.starts_with("08") || sqlstate.starts_with("57P")
}
