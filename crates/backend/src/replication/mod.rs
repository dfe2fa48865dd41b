//! Logical replication from PostgreSQL (15): the streaming replication
//! protocol on a plain socket (`wire.rs`) and the `pgoutput` decoder
//! (`pgoutput.rs`, pure functions over bytes).
//!
//! Synchronous on purpose: autorefresh runs on plain threads next to the
//! sync `postgres` client, so this needs neither Tokio nor a TLS stack.
//! Every wait on the server is bounded where a caller needs it to be:
//! [`ReplicationStream::next_event`] returns `None` at its timeout. What to
//! acknowledge, and when, is the caller's: keepalives are events, and
//! [`ReplicationStream::send_status`] sends whatever positions it is given.

mod pgoutput;
mod wire;

use std::fmt;
use std::str::FromStr;

pub use pgoutput::{CopyDataEvent, PgOutputError, decode_copy_data, decode_pgoutput};
pub use wire::{CreatedSlot, ReplicationConnection, ReplicationStream};

use crate::BackendError;

/// A PostgreSQL WAL position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PgLsn(pub u64);

/// PostgreSQL's text form, `16/B374D848`.
impl fmt::Display for PgLsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

/// Text that is not `HEX/HEX` with each half at most 8 hex digits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid input syntax for type pg_lsn: \"{0}\"")]
pub struct ParseLsnError(pub String);

impl FromStr for PgLsn {
    type Err = ParseLsnError;

    fn from_str(text: &str) -> Result<PgLsn, ParseLsnError> {
        let invalid = || ParseLsnError(text.to_owned());
        let (high, low) = text.split_once('/').ok_or_else(invalid)?;
        let half = |part: &str| {
            let hex = !part.is_empty() && part.len() <= 8 && part.bytes().all(|b| b.is_ascii_hexdigit());
            if hex { u32::from_str_radix(part, 16).map_err(|_| invalid()) } else { Err(invalid()) }
        };
        Ok(PgLsn((u64::from(half(high)?) << 32) | u64::from(half(low)?)))
    }
}

/// One decoded message of the replication stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicationEvent {
    Begin {
        final_lsn: PgLsn,
        commit_time_us: i64,
        xid: u32,
    },
    Commit {
        commit_lsn: PgLsn,
        end_lsn: PgLsn,
        commit_time_us: i64,
    },
    Origin {
        commit_lsn: PgLsn,
        name: String,
    },
    Relation(Relation),
    Insert {
        relation: u32,
        new: Vec<TupleValue>,
    },
    /// `old`: Some for REPLICA IDENTITY FULL ('O'), or when the key changed
    /// ('K': key columns only, the others Null).
    Update {
        relation: u32,
        old: Option<Vec<TupleValue>>,
        new: Vec<TupleValue>,
    },
    /// `old` is 'K' (key columns, others Null) or 'O' (FULL).
    Delete {
        relation: u32,
        old: Vec<TupleValue>,
    },
    Truncate {
        relations: Vec<u32>,
        cascade: bool,
        restart_identity: bool,
    },
    Type {
        oid: u32,
        schema: String,
        name: String,
    },
    /// `pg_logical_emit_message` (the stream is started with `messages 'true'`).
    Message {
        transactional: bool,
        prefix: String,
        content: Vec<u8>,
    },
    /// Primary keepalive ('k'): `wal_end` is the last position the server
    /// sent; `reply_requested` asks for a status update now.
    Keepalive {
        wal_end: PgLsn,
        server_time_us: i64,
        reply_requested: bool,
    },
}

/// A table as pgoutput describes it, sent before its first change in a
/// session and again after its definition changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relation {
    pub oid: u32,
    pub schema: String,
    pub name: String,
    /// `relreplident`: b'd' default, b'n' nothing, b'f' full, b'i' index.
    pub replica_identity: u8,
    pub columns: Vec<RelationColumn>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelationColumn {
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
    pub part_of_key: bool,
}

/// One column of a tuple, in PostgreSQL's text output form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TupleValue {
    Null,
    /// A TOASTed value the change did not touch: the cache keeps its own copy.
    UnchangedToast,
    Text(String),
    /// The type's binary send format (START_REPLICATION's `binary 'true'`).
    Binary(Vec<u8>),
}

/// NAMEDATALEN - 1.
pub const SLOT_NAME_BYTES_MAX: usize = 63;

/// PostgreSQL's rule for slot names (`ReplicationSlotValidateName`): lower
/// case letters, digits and underscores, 1 to 63 bytes. 42602 otherwise.
pub fn validate_slot_name(name: &str) -> Result<(), BackendError> {
    let reason = if name.is_empty() {
        Some("replication slot name is empty")
    } else if name.len() > SLOT_NAME_BYTES_MAX {
        Some("replication slot name is too long (at most 63 bytes)")
    } else if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        Some("replication slot names may only contain lower case letters, numbers, and the underscore character")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(BackendError::InvalidSlotName { name: name.to_owned(), reason }),
        None => Ok(()),
    }
}

/// The slot name double-quoted for a replication command, after
/// [`validate_slot_name`] (so no quote can be inside).
pub fn quote_slot_name(name: &str) -> Result<String, BackendError> {
    validate_slot_name(name)?;
    Ok(format!("\"{name}\""))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lsn_text_round_trips() {
        let lsn: PgLsn = "16/B374D848".parse().unwrap();
        assert_eq!(lsn, PgLsn(0x16_B374_D848));
        assert_eq!(lsn.to_string(), "16/B374D848");
        assert_eq!(PgLsn(0).to_string(), "0/0");
        assert_eq!("FFFFFFFF/FFFFFFFF".parse::<PgLsn>().unwrap(), PgLsn(u64::MAX));
        for bad in ["", "/", "1/", "/1", "1/2/3", "G/0", "123456789/0", "+1/0", " 1/0"] {
            assert!(bad.parse::<PgLsn>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn slot_names_follow_postgres_rules() {
        assert_eq!(quote_slot_name("pgtier_1").unwrap(), "\"pgtier_1\"");
        assert!(validate_slot_name(&"a".repeat(63)).is_ok());
        for bad in ["", "A", "a-b", "a\"b", "é", &"a".repeat(64)] {
            let error = validate_slot_name(bad).unwrap_err();
            assert_eq!(error.sqlstate(), "42602", "{bad:?}");
        }
    }
}
