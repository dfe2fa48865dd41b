//! This pgtier in PostgreSQL: its node name, the one function that names
//! what is made after it, and its claim on the name.
//!
//! Several pgtier may share one PostgreSQL, each under its node name
//! (`[cache] awt_node`). What pgtier keeps in or makes in PostgreSQL is named
//! after the node ([`object`]): write-through progress rows, SWT log rows,
//! the replication origins of apply sessions, autorefresh's publications and
//! slots. The positions stored there are positions in one data directory's
//! WAL, so a node name is owned by one data directory — its incarnation, made
//! when the directory was created — at a time, and `pgtier.nodes` says which.
//!
//! A directory claims its name before it first writes through or streams
//! (CREATE CACHE GROUP, and the start of every write-through session). A
//! name another directory owns is refused with 55000 unless taken over
//! explicitly ([`claim`] with `takeover`): the lost directory's rows stay
//! under its incarnation for inspection, and the new one starts from clean
//! positions, so its commits are never skipped as "already applied" because
//! of positions that were never its own. Every write-through transaction
//! checks in PostgreSQL, under a shared advisory lock that a takeover takes
//! exclusively, that its directory still owns the name; a directory taken
//! over (two live processes with one name) stops writing through.

use postgres::Client;

use crate::error::{CacheError, connection_error};
use crate::hash::stable_hash;

/// Longest node name: the names made after it must fit PostgreSQL's 63
/// bytes with room for a group's.
pub const NODE_NAME_MAX: usize = 24;

/// Who this pgtier is in PostgreSQL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdentity {
    /// Validated by [`validate_node_name`].
    pub name: String,
    /// The data directory's id (`pgtier_engine::Database::incarnation`).
    pub incarnation: String,
    /// The directory is older than incarnation ids: rows PostgreSQL holds
    /// for the name from before them are its own.
    pub adopted: bool,
    /// The epoch of the pair's lease this process holds (`lease.rs`), 0
    /// outside a pair. Every write-through session carries it
    /// (`pgtier.epoch`) and PostgreSQL refuses its transactions once the
    /// lease has passed to another member (`check_node`).
    pub epoch: i64,
}

/// Node names are `[a-z][a-z0-9]*`, at most [`NODE_NAME_MAX`] bytes: every
/// name made from one (`pgtier_<node>_...`) is then a valid slot name, and
/// no node's prefix is another's (with `_` allowed, node `a`'s objects
/// `pgtier_a_...` would include node `a_b`'s).
pub fn validate_node_name(name: &str) -> Result<(), CacheError> {
    let reason = if name.is_empty() {
        Some("is empty")
    } else if name.len() > NODE_NAME_MAX {
        Some("is longer than 24 characters")
    } else if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        Some("does not start with a lowercase letter")
    } else if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
        Some("has characters other than lowercase letters and digits")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(CacheError::InvalidNodeName { name: name.to_owned(), reason }),
        None => Ok(()),
    }
}

/// Something made in PostgreSQL after the node's name.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NodeObject<'a> {
    /// The replication origin of AWT apply lane `n`.
    AwtLane(usize),
    /// The replication origin of AWT's control connection (transactions spanning lanes).
    AwtControl,
    /// The replication origin of SWT apply slot `n`.
    SwtSlot(i32),
    /// Autorefresh's publication of a group.
    Publication { group: &'a str },
    /// Autorefresh's replication slot of a group (slots are the whole server's: the database is in the name).
    Slot { database: &'a str, group: &'a str },
    /// The prefix every replication origin of the node starts with.
    OriginPrefix,
}

/// The name of `object` of node `node`: the one place these names are made,
/// so the origins write-through sets and the prefix autorefresh filters by agree.
pub(crate) fn object(node: &str, object: NodeObject<'_>) -> String {
    debug_assert!(validate_node_name(node).is_ok(), "node names are validated at startup: {node:?}");
    let prefix = format!("pgtier_{node}_");
    match object {
        NodeObject::AwtLane(lane) => format!("{prefix}{lane}"),
        NodeObject::AwtControl => format!("{prefix}x"),
        NodeObject::SwtSlot(slot) => format!("{prefix}s{slot}"),
        NodeObject::OriginPrefix => prefix,
        NodeObject::Publication { group } => sanitized(&prefix, group),
        NodeObject::Slot { database, group } => sanitized(&prefix, &format!("{database}_{group}")),
    }
}

/// `prefix` + `rest` lowercased, anything but `[a-z0-9_]` turned into `_`,
/// and a hash of the original when that changed it or it was too long:
/// distinct originals ("A" and "a", "a-b" and "a_b") never share a name.
fn sanitized(prefix: &str, rest: &str) -> String {
    let raw = format!("{prefix}{rest}");
    let mut name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_ascii_lowercase() } else { '_' }).collect();
    if name != raw || name.len() > 63 {
        let hash = stable_hash(&raw);
        name.truncate(50);
        name = format!("{name}_{:012x}", hash & 0xffff_ffff_ffff);
    }
    name
}

/// What a successful claim found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The name was this directory's already, or free.
    Owned,
    /// Rows written before incarnation ids existed became this (adopted) directory's.
    Adopted,
    /// Taken from the directory with this incarnation ("" for rows from before ids).
    TakenOver { previous: String },
}

/// Claims `identity.name` for `identity.incarnation` in PostgreSQL (schema
/// `pgtier` must exist: `backend_schema::ensure`). Refuses (55000) a name
/// another directory owns, unless `takeover`.
pub(crate) fn claim(client: &mut Client, identity: &NodeIdentity, takeover: bool) -> Result<Claim, CacheError> {
    let error = |e: postgres::Error| connection_error(&e);
    let mut txn = client.transaction().map_err(error)?;
    txn.execute("SELECT pg_advisory_xact_lock(hashtext('pgtier node ' || $1))", &[&identity.name]).map_err(error)?;
    let owner: Option<(String, String)> = txn
        .query_opt("SELECT incarnation, claimed_at::text FROM pgtier.nodes WHERE node = $1", &[&identity.name])
        .map_err(error)?
        .map(|row| (row.get(0), row.get(1)));
    let outcome = match owner {
        Some((owner, _)) if owner == identity.incarnation => Claim::Owned,
        Some((owner, _)) if takeover => {
            txn.execute(
                "UPDATE pgtier.nodes SET incarnation = $2, previous = incarnation, claimed_at = now() WHERE node = $1",
                &[&identity.name, &identity.incarnation],
            )
            .map_err(error)?;
            Claim::TakenOver { previous: owner }
        }
        Some((owner, since)) => return Err(CacheError::NodeOwned { node: identity.name.clone(), owner, since }),
        None => {
            // Rows from before incarnation ids carry "".
            let legacy: i64 = txn
                .query_one(
                    "SELECT (SELECT count(*) FROM pgtier.awt_progress WHERE node = $1 AND incarnation = '')
                          + (SELECT count(*) FROM pgtier.swt_log WHERE node = $1 AND incarnation = '')",
                    &[&identity.name],
                )
                .map_err(error)?
                .get(0);
            let outcome = if legacy == 0 {
                Claim::Owned
            } else if identity.adopted {
                for table in ["awt_progress", "swt_log", "awt_errors"] {
                    txn.execute(
                        &format!("UPDATE pgtier.{table} SET incarnation = $2 WHERE node = $1 AND incarnation = ''"),
                        &[&identity.name, &identity.incarnation],
                    )
                    .map_err(error)?;
                }
                Claim::Adopted
            } else if takeover {
                Claim::TakenOver { previous: String::new() }
            } else {
                return Err(CacheError::NodeOwned {
                    node: identity.name.clone(),
                    owner: "(a data directory from before incarnation ids)".into(),
                    since: "an earlier version".into(),
                });
            };
            txn.execute(
                "INSERT INTO pgtier.nodes (node, incarnation, epoch)
                 VALUES ($1, $2, coalesce((SELECT epoch FROM pgtier.leases WHERE node = $1), 0))",
                &[&identity.name, &identity.incarnation],
            )
            .map_err(error)?;
            outcome
        }
    };
    txn.commit().map_err(error)?;
    Ok(outcome)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{NodeObject, object, validate_node_name};

    #[test]
    fn node_names() {
        for good in ["pgtier", "n1", "cacheeu1", &"a".repeat(24)] {
            assert!(validate_node_name(good).is_ok(), "{good}");
        }
        for bad in ["", "1n", "N1", "n_1", "n-1", "n 1", "é", &"a".repeat(25)] {
            assert_eq!(validate_node_name(bad).unwrap_err().sqlstate(), "42602", "{bad}");
        }
    }

    #[test]
    fn names_made_after_a_node() {
        assert_eq!(object("n1", NodeObject::AwtLane(3)), "pgtier_n1_3");
        assert_eq!(object("n1", NodeObject::AwtControl), "pgtier_n1_x");
        assert_eq!(object("n1", NodeObject::SwtSlot(0)), "pgtier_n1_s0");
        assert_eq!(object("n1", NodeObject::Publication { group: "ref_data" }), "pgtier_n1_ref_data");
        let prefix = object("n1", NodeObject::OriginPrefix);
        for origin in [
            object("n1", NodeObject::AwtLane(0)),
            object("n1", NodeObject::AwtControl),
            object("n1", NodeObject::SwtSlot(7)),
        ] {
            assert!(origin.starts_with(&prefix));
        }
        // No node's objects carry another node's prefix.
        for other in ["n12", "n", "n1x"] {
            for origin in [
                object(other, NodeObject::AwtLane(0)),
                object(other, NodeObject::AwtControl),
                object(other, NodeObject::SwtSlot(1)),
            ] {
                assert!(!origin.starts_with(&prefix), "{origin} looks like node n1's");
            }
        }
        let odd = object("n1", NodeObject::Publication { group: "Ref-Data" });
        assert!(odd.starts_with("pgtier_n1_ref_data_"));
        assert_ne!(odd, object("n1", NodeObject::Publication { group: "ref_data" }));
        assert_ne!(
            object("n1", NodeObject::Publication { group: "A" }),
            object("n1", NodeObject::Publication { group: "a" })
        );
        let long = object("node", NodeObject::Publication { group: &"g".repeat(100) });
        assert!(long.len() <= 63);
        assert_eq!(object("n1", NodeObject::Slot { database: "app", group: "g" }), "pgtier_n1_app_g");
    }
}
