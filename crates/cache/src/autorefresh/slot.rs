//! The PostgreSQL side of autorefresh: the group's publication and
//! replication slot, found, created, watched and dropped by name.
//!
//! Names are `pgtier_<node>_<group>` for the publication (one database's
//! object) and `pgtier_<node>_<database>_<group>` for the slot (slots are
//! the whole server's: two databases may hold groups of one name), made by
//! `node::object`. A slot is this node's and this group's by its name alone,
//! so one left behind by a crashed pgtier is found again, never duplicated.

use postgres::Client;

use pgtier_backend::copy_out::quote_identifier;
use pgtier_backend::replication::{CreatedSlot, PgLsn, ReplicationConnection};

use crate::error::CacheError;
use crate::group::CacheGroup;
use crate::node::{self, NodeObject};

/// The replication slot of `group` of node `node` in `database`.
pub(crate) fn slot_name(node: &str, database: &str, group: &str) -> String {
    node::object(node, NodeObject::Slot { database, group })
}

/// The database a connection to `backend` opens (PostgreSQL's default: the user's name).
pub(crate) fn database_of(backend: &pgtier_backend::ConnectParams) -> String {
    backend.config.get_dbname().or(backend.config.get_user()).unwrap_or("postgres").to_owned()
}

/// The publication of `group` on node `node`.
pub(crate) fn publication_name(node: &str, group: &str) -> String {
    node::object(node, NodeObject::Publication { group })
}

/// What `pg_replication_slots` says of a slot.
#[derive(Clone, Debug)]
pub(crate) struct SlotState {
    /// The walsender streaming it, when one is.
    pub active_pid: Option<i32>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: Option<String>,
    /// WAL the slot keeps from being removed (bytes behind the server's current position).
    pub retained_bytes: u64,
}

/// Refuses to start when PostgreSQL cannot decode its WAL logically.
pub(crate) fn check_wal_level(client: &mut Client) -> Result<(), CacheError> {
    let row =
        client.query_one("SELECT current_setting('wal_level')", &[]).map_err(|e| pg_error("reading wal_level", &e))?;
    let level: String = row.get(0);
    if level != "logical" {
        return Err(CacheError::Autorefresh {
            sqlstate: "55000",
            message: format!("autorefresh needs PostgreSQL's wal_level = logical (it is \"{level}\")"),
            hint: Some("Run ALTER SYSTEM SET wal_level = logical on PostgreSQL and restart it (max_replication_slots and max_wal_senders must be at least 1 too).".into()),
        });
    }
    Ok(())
}

/// Creates the publication of the group's tables, or makes an existing one
/// publish exactly them (a group re-created with other tables).
pub(crate) fn ensure_publication(client: &mut Client, name: &str, group: &CacheGroup) -> Result<(), CacheError> {
    let tables: Vec<String> = group
        .tables
        .iter()
        .map(|t| format!("{}.{}", quote_identifier(&t.source.name.schema), quote_identifier(&t.source.name.table)))
        .collect();
    let exists = client
        .query_opt("SELECT 1 FROM pg_publication WHERE pubname = $1", &[&name])
        .map_err(|e| pg_error("reading pg_publication", &e))?
        .is_some();
    let sql = if exists {
        format!("ALTER PUBLICATION {} SET TABLE {}", quote_identifier(name), tables.join(", "))
    } else {
        format!("CREATE PUBLICATION {} FOR TABLE {}", quote_identifier(name), tables.join(", "))
    };
    client.batch_execute(&sql).map_err(|e| pg_error("creating the autorefresh publication", &e))
}

/// The slot `name`, when PostgreSQL has it.
pub(crate) fn slot_state(client: &mut Client, name: &str) -> Result<Option<SlotState>, CacheError> {
    let row = client
        .query_opt(
            "SELECT active_pid, wal_status, \
                    coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::int8 \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .map_err(|e| pg_error("reading pg_replication_slots", &e))?;
    Ok(row.map(|row| SlotState {
        active_pid: row.get(0),
        wal_status: row.get(1),
        retained_bytes: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
    }))
}

/// The server's current WAL insert position (with `synchronous_commit =
/// off` a commit may be inserted and not yet written).
pub(crate) fn current_wal(client: &mut Client) -> Result<PgLsn, CacheError> {
    let row = client
        .query_one("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::int8", &[])
        .map_err(|e| pg_error("reading pg_current_wal_insert_lsn()", &e))?;
    Ok(PgLsn(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)))
}

/// Drops slot `name` if it exists, first ending a walsender still streaming
/// it (a pgtier that crashed leaves one until PostgreSQL notices).
pub(crate) fn drop_slot(client: &mut Client, name: &str) -> Result<(), CacheError> {
    for _ in 0..50 {
        let Some(state) = slot_state(client, name)? else { return Ok(()) };
        if let Some(pid) = state.active_pid {
            client
                .execute("SELECT pg_terminate_backend($1)", &[&pid])
                .map_err(|e| pg_error("ending the slot's walsender", &e))?;
            std::thread::sleep(std::time::Duration::from_millis(100));
            continue;
        }
        match client.execute("SELECT pg_drop_replication_slot($1)", &[&name]) {
            Ok(_) => return Ok(()),
            // Became active again or was dropped meanwhile: look again.
            Err(error) if matches!(error.code().map(|c| c.code()), Some("55006" | "42704")) => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(error) => return Err(pg_error("dropping the autorefresh slot", &error)),
        }
    }
    Err(CacheError::Autorefresh {
        sqlstate: "55006",
        message: format!("replication slot \"{name}\" stays in use by another process"),
        hint: None,
    })
}

/// Drops the publication `name` if it exists.
pub(crate) fn drop_publication(client: &mut Client, name: &str) -> Result<(), CacheError> {
    client
        .batch_execute(&format!("DROP PUBLICATION IF EXISTS {}", quote_identifier(name)))
        .map_err(|e| pg_error("dropping the autorefresh publication", &e))
}

/// Creates slot `name` (a crashed attempt's leftover dropped first). With
/// `export_snapshot`, the snapshot stays usable while `connection` is idle.
pub(crate) fn create_slot(
    client: &mut Client,
    connection: &mut ReplicationConnection,
    name: &str,
    export_snapshot: bool,
) -> Result<CreatedSlot, CacheError> {
    drop_slot(client, name)?;
    Ok(connection.create_logical_slot(name, false, export_snapshot)?)
}

pub(crate) fn pg_error(what: &str, error: &postgres::Error) -> CacheError {
    CacheError::Backend(pgtier_backend::BackendError::from_postgres(what, error))
}

#[cfg(test)]
mod tests {
    use super::{publication_name, slot_name};

    #[test]
    fn names_are_valid_slot_names_and_distinct() {
        assert_eq!(publication_name("n1", "ref_data"), "pgtier_n1_ref_data");
        let odd = publication_name("n1", "Ref-Data");
        assert!(odd.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "{odd}");
        assert_ne!(odd, publication_name("n1", "ref_data"));
        assert_ne!(publication_name("n1", "A"), publication_name("n1", "a"));
        assert_ne!(slot_name("n1", "db1", "g"), slot_name("n1", "db2", "g"));
        assert_eq!(slot_name("n1", "db1", "g"), "pgtier_n1_db1_g");
        let long = publication_name("node", &"g".repeat(100));
        assert!(long.len() <= 63, "{long}");
    }
}
