//! The soak's data: TATP populated by this kit and the cycled group's two
//! tables in PostgreSQL; over the wire, the AWT group over TATP (loaded
//! whole) and the READONLY group the cycles LOAD and UNLOAD.

use crate::target::DbError;
use crate::targets::postgres::{PgTarget, db_error};
use crate::tatp::population::{PopulateOptions, populate};
use crate::tatp::schema::TABLES;

use super::SoakOptions;

/// The AWT group over the four TATP tables.
pub const TATP_GROUP: &str = "tatp";
/// The READONLY group the cycles load and unload.
pub const CYCLE_GROUP: &str = "soak_cycle";
/// Child rows per root of the cycled group.
pub const ENTRIES_PER_ACCOUNT: u64 = 4;

pub(crate) fn connect(url: &str) -> Result<postgres::Client, DbError> {
    pgtier_backend::connect::connect(url).map_err(|e| DbError::new(Some(e.sqlstate()), e.to_string()))
}

/// TATP (`options.subscribers`, seed `options.seed`) and the cycled
/// group's tables, created anew in PostgreSQL at `backend_url`.
pub fn prepare_postgres(options: &SoakOptions, backend_url: &str) -> Result<(), DbError> {
    let pg = PgTarget::open(backend_url).map_err(|e| DbError::new(Some(e.sqlstate()), e.to_string()))?;
    let populate_options = PopulateOptions {
        subscribers: options.subscribers,
        streams: options.populate_streams.max(1),
        seed: options.seed,
        progress: false,
    };
    populate(&pg, &populate_options).map_err(|e| DbError::new(None, format!("populating TATP: {e}")))?;
    let mut client = connect(backend_url)?;
    let n = options.cycle_accounts;
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS soak_entry, soak_account;
             CREATE TABLE soak_account (a_id integer PRIMARY KEY, name text NOT NULL, balance bigint NOT NULL);
             CREATE TABLE soak_entry (a_id integer NOT NULL REFERENCES soak_account (a_id), e_id integer NOT NULL,
                 amount bigint NOT NULL, note text, PRIMARY KEY (a_id, e_id));
             INSERT INTO soak_account SELECT i, 'account ' || i, 1000 + i FROM generate_series(1, {n}) i;
             INSERT INTO soak_entry SELECT a, e, a * 10 + e, repeat('x', 40)
                 FROM generate_series(1, {n}) a, generate_series(1, {ENTRIES_PER_ACCOUNT}) e;
             ANALYZE soak_account; ANALYZE soak_entry;"
        ))
        .map_err(|e| db_error(&e))
}

/// Over the server: the AWT group over TATP, loaded whole (its row count
/// checked), and the cycled READONLY group, created empty.
pub(crate) fn create_groups(server_url: &str, options: &SoakOptions) -> Result<(), DbError> {
    let mut client = connect(server_url)?;
    client
        .batch_execute(&format!("CREATE AWT CACHE GROUP {TATP_GROUP} FROM {}", TABLES.join(", ")))
        .map_err(|e| db_error(&e))?;
    let loaded = client.execute(&format!("LOAD CACHE GROUP {TATP_GROUP} PARALLEL 2"), &[]).map_err(|e| db_error(&e))?;
    if loaded != options.subscribers {
        return Err(DbError::new(
            None,
            format!("LOAD CACHE GROUP {TATP_GROUP} loaded {loaded} subscribers, not {}", options.subscribers),
        ));
    }
    client
        .batch_execute(&format!(
            "CREATE READONLY CACHE GROUP {CYCLE_GROUP} FROM soak_account, soak_entry AUTOREFRESH OFF"
        ))
        .map_err(|e| db_error(&e))
}
