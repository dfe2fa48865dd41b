//! `CacheError`: every failure of defining or loading a cache group, with
//! the SQLSTATE (and hint) PostgreSQL would give for the same situation.

use pgtier_backend::{BackendError, ConnectError};
use pgtier_engine::EngineError;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A table outside schema `public` (schemas come later).
    #[error("table \"{table}\" is not in schema public; cache groups hold only tables of schema public for now")]
    UnsupportedSchema { table: String },

    /// The same table named twice in one group.
    #[error("table \"{table}\" is named more than once in cache group \"{group}\"")]
    DuplicateTable { group: String, table: String },

    /// Instances and rows are keyed by the primary key.
    #[error("table \"{table}\" has no primary key")]
    NoPrimaryKey { table: String },

    /// A non-root table with no foreign key to another table of the group,
    /// or with several, or whose parents do not lead to the root.
    #[error("table \"{table}\" {reason}")]
    NotInTree { table: String, reason: String },

    /// A column whose type the engine does not store.
    #[error("column \"{column}\" of table \"{table}\" has type {type_name}, which cache groups do not support")]
    UnsupportedType { table: String, column: String, type_name: String, hint: String },

    /// The group needs at least its root.
    #[error("cache group \"{group}\": {reason}")]
    InvalidSpec { group: String, reason: String },

    /// PostgreSQL's definition changed since the group was defined.
    #[error("table \"{table}\" changed in PostgreSQL since cache group \"{group}\" was defined")]
    DefinitionChanged { group: String, table: String },

    /// A value PostgreSQL sent that the column's engine type cannot hold
    /// (a numeric NaN, a value beyond numeric(38)).
    #[error("table \"{table}\", column \"{column}\": {reason}")]
    BadValue { table: String, column: String, reason: String },

    /// Child rows that did not arrive in their root's order: a bug, or the
    /// streams did not read one snapshot.
    #[error("load of cache group \"{group}\": {reason}")]
    StreamOrder { group: String, reason: String },

    #[error("cache group \"{group}\" does not exist")]
    UndefinedGroup { group: String },

    #[error("cache group \"{group}\" already exists")]
    DuplicateGroup { group: String },

    /// A table of the new group is already cached by another group.
    #[error("table \"{table}\" is already in cache group \"{other}\"")]
    TableInOtherGroup { table: String, other: String },

    /// A table of the new group exists in the cache as a local table.
    #[error("relation \"{table}\" already exists in the cache")]
    TableExists { table: String },

    /// A WHERE on a table other than the root.
    #[error("a cache group's WHERE condition may only be on its root table; \"{table}\" is not the root")]
    PredicateNotOnRoot { table: String },

    /// `AGING USE column` on a column that is missing or not a date/timestamp.
    #[error("cache group \"{group}\": aging column \"{column}\" {reason}")]
    AgingColumn { group: String, column: String, reason: String },

    /// Something needs PostgreSQL but `[backend]` is not configured.
    #[error("no PostgreSQL backend is configured")]
    NoBackend,

    /// A cache-group statement that does not parse.
    #[error("syntax error in cache group statement: {reason}")]
    Syntax { reason: String },

    /// An AWT group's unpropagated changes cannot be told (write-through is
    /// not running or far behind), so nothing may be loaded over the cache.
    #[error(
        "cache group \"{group}\": write-through to PostgreSQL is not keeping up, so rows cannot be loaded safely now{}",
        cause.as_ref().map(|cause| format!(" (its last error: {cause})")).unwrap_or_default()
    )]
    WriteThroughBehind { group: String, cause: Option<String> },

    /// The dynamic load this lookup waited for (another session's) failed.
    #[error("dynamic load of cache group \"{group}\" failed: {reason}")]
    DynamicLoad { group: String, sqlstate: String, reason: String },

    /// Autorefresh (READONLY groups kept current by logical replication)
    /// cannot start or had to stop.
    #[error("{message}")]
    Autorefresh { sqlstate: &'static str, message: String, hint: Option<String> },

    /// The flash tier cannot do what was asked (not configured, disabled,
    /// an I/O error, a group that cannot use it).
    #[error("flash tier: {reason}")]
    Tier { sqlstate: &'static str, reason: String },

    /// `[cache] awt_node` is not a usable node name.
    #[error("invalid pgtier node name \"{name}\": it {reason}")]
    InvalidNodeName { name: String, reason: &'static str },

    /// Another data directory owns the node name in PostgreSQL (`node.rs`).
    #[error(
        "pgtier node \"{node}\" belongs to another data directory (incarnation {owner}, claimed {since}): the write-through positions PostgreSQL holds under that name are not this directory's"
    )]
    NodeOwned { node: String, owner: String, since: String },

    /// A takeover gave the node name to another data directory while this
    /// one ran, or the pair's lease passed to the other member (`lease.rs`).
    #[error(
        "pgtier node \"{node}\" was taken over by another data directory or by the other member of its pair; this one stopped writing through"
    )]
    NodeTakenOver { node: String },

    /// PostgreSQL's progress rows for this node and directory stand past
    /// its log's durable end: it holds changes this log lacks (a standby
    /// promoted behind what its active propagated, or the directory
    /// restored from an older copy under the same identity). Writing
    /// through would skip this log's next transactions at those positions.
    #[error(
        "PostgreSQL's write-through progress for pgtier node \"{node}\" stands at log position {progress}, past this data directory's log end {end}: this directory lacks changes it (or the member it was copied from) already propagated; write-through refuses to start"
    )]
    LogBehindPostgres { node: String, progress: u64, end: u64 },

    /// An active/standby pair's lease settings are unusable (`lease.rs`).
    #[error("invalid lease for an active/standby pair: {0}")]
    LeaseConfig(String),

    /// A cached table of the group changed in PostgreSQL: its write-through is held.
    #[error("cache group \"{group}\": table \"{table}\" {reason}")]
    DefinitionDrift { group: String, table: String, reason: String },

    /// A write-through session could not mark its changes with its
    /// replication origin (PostgreSQL's SQLSTATE: 42501 without the
    /// privilege, 53400 when its origin slots are used up).
    #[error("write-through cannot set replication origin \"{origin}\" on its PostgreSQL session: {message}")]
    ReplicationOrigin { origin: String, sqlstate: String, message: String },

    /// A write-through lane had work and made no progress (reported, then reconnected).
    #[error("{message}")]
    Stalled { message: String },

    /// Not an error: propagation starts a new session at once (a group to hold or resume).
    #[error("write-through restarts: {reason}")]
    Restart { reason: String },
    /// The block of values reserved from PostgreSQL's sequence is used up
    /// and PostgreSQL cannot be reached to reserve the next one.
    #[error("cannot reserve values of sequence {sequence} from PostgreSQL: {reason}")]
    SequenceUnavailable { sequence: String, sqlstate: String, reason: String, block: u32 },

    /// A node-partitioned group's key another node owns (`shard.rs`).
    #[error("{} = {} of cache group \"{}\" is {}, not by this node \"{}\"", .0.column, .0.key, .0.group, owner_phrase(.0.owner.as_ref()), .0.node)]
    WrongNode(Box<crate::shard::WrongNode>),

    /// A statement on a node-partitioned group this node cannot answer
    /// exactly from its own range.
    #[error("table \"{table}\" of cache group \"{group}\" is partitioned over pgtier nodes by {column}: {reason}")]
    ShardScan { group: String, table: String, column: String, reason: String },

    /// Not built yet.
    #[error("{what} is not supported yet")]
    NotYet { what: &'static str },

    #[error(transparent)]
    Connect(#[from] ConnectError),

    #[error(transparent)]
    Backend(#[from] BackendError),

    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl CacheError {
    /// This error as a hook's error to the engine (a miss hook, a commit
    /// participant): the statement fails with its SQLSTATE, text and hint.
    pub(crate) fn to_engine(&self) -> pgtier_engine::EngineError {
        pgtier_engine::EngineError::hook(self.sqlstate(), self.to_string(), self.hint())
    }

    pub fn sqlstate(&self) -> &str {
        match self {
            CacheError::UnsupportedSchema { .. } | CacheError::UnsupportedType { .. } => "0A000",
            CacheError::DuplicateTable { .. } => "42712",
            CacheError::NoPrimaryKey { .. } => "42P16",
            CacheError::NotInTree { .. } => "42830",
            CacheError::InvalidSpec { .. } => "42P16",
            CacheError::DefinitionChanged { .. } => "55000",
            CacheError::BadValue { .. } => "22003",
            CacheError::StreamOrder { .. } => "XX000",
            CacheError::UndefinedGroup { .. } => "42704",
            CacheError::DuplicateGroup { .. } | CacheError::TableExists { .. } => "42P07",
            CacheError::TableInOtherGroup { .. } => "42P07",
            CacheError::PredicateNotOnRoot { .. } => "42P17",
            CacheError::NoBackend => "08001",
            CacheError::AgingColumn { reason, .. } => {
                if reason.starts_with("is not") {
                    "42703"
                } else {
                    "42804"
                }
            }
            CacheError::Syntax { .. } => "42601",
            CacheError::NotYet { .. } | CacheError::ShardScan { .. } => "0A000",
            CacheError::WrongNode(_) => crate::shard::WRONG_NODE,
            CacheError::WriteThroughBehind { .. } => "55000",
            CacheError::InvalidNodeName { .. } => "42602",
            CacheError::LeaseConfig(_) => "22023",
            CacheError::NodeOwned { .. }
            | CacheError::NodeTakenOver { .. }
            | CacheError::DefinitionDrift { .. }
            | CacheError::LogBehindPostgres { .. } => "55000",
            CacheError::ReplicationOrigin { sqlstate, .. } => sqlstate,
            CacheError::Stalled { .. } => "57014",
            CacheError::Restart { .. } => "00000",
            CacheError::DynamicLoad { sqlstate, .. } => sqlstate,
            CacheError::Autorefresh { sqlstate, .. } => sqlstate,
            CacheError::Tier { sqlstate, .. } => sqlstate,
            CacheError::SequenceUnavailable { sqlstate, .. } => sqlstate,
            CacheError::Connect(error) => error.sqlstate(),
            CacheError::Backend(error) => error.sqlstate(),
            CacheError::Engine(error) => error.sqlstate(),
        }
    }

    /// PostgreSQL's HINT field, when there is something the user can do.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            CacheError::UnsupportedSchema { .. } => "Move the table to schema public, or cache it later when other schemas are supported.".into(),
            CacheError::DuplicateTable { .. } => "Name each table once.".into(),
            CacheError::NoPrimaryKey { table } => {
                format!("Add a primary key to \"{table}\" in PostgreSQL: cache instances and rows are located by it.")
            }
            CacheError::NotInTree { .. } => {
                "Each table but the root must have exactly one foreign key to another table of the group, and following them must lead to the root.".into()
            }
            CacheError::UnsupportedType { hint, .. } => hint.clone(),
            CacheError::NoBackend => "Set [backend] url in the server's config file (or pass the backend to Cache::open).".into(),
            CacheError::TableInOtherGroup { other, .. } => format!("Drop cache group \"{other}\" first, or leave the table out."),
            CacheError::PredicateNotOnRoot { .. } => "Put the condition on the root table: instances are chosen by their root row.".into(),
            CacheError::WriteThroughBehind { .. } => {
                "Loading now could bring back rows changed in the cache but not yet in PostgreSQL. Check pgtier_cache_propagation (is PostgreSQL reachable?) and retry.".into()
            }
            CacheError::DefinitionChanged { .. } => "Drop and define the cache group again.".into(),
            CacheError::LogBehindPostgres { .. } => "Its transactions stay in its log, not propagated. Re-seed this member from the member that wrote them through (pgtier backup, pgtier restore --standby), or restore without --standby to give the directory a new identity.".into(),
            CacheError::InvalidNodeName { .. } => "Set [cache] awt_node to lowercase letters and digits, starting with a letter, at most 24 characters (it names pgtier's rows, replication origins and slots in PostgreSQL).".into(),
            CacheError::NodeOwned { .. } => "If that data directory is gone for good (a replaced disk, a new machine), take the name over: run TAKEOVER CACHE NODE (or `pgtier cache takeover`, or start with `pgtier serve --takeover`); its transactions not yet in PostgreSQL are lost with it, and its rows stay in pgtier.awt_progress under its incarnation. If it still runs, give this pgtier another [cache] awt_node.".into(),
            CacheError::NodeTakenOver { .. } => "Another pgtier runs under this node name: stop one of them, or give it another [cache] awt_node. In an active/standby pair the other member holds the lease now (a failover): this one must rejoin as its standby. This one's transactions not yet in PostgreSQL are not propagated.".into(),
            CacheError::DefinitionDrift { .. } => "Write-through of the group waits, its transactions kept, until the table is what the group was defined from again (undo the change in PostgreSQL: propagation resumes by itself within seconds). To keep the change instead, DROP CACHE GROUP (its transactions not yet in PostgreSQL are discarded), then CREATE and LOAD it again.".into(),
            CacheError::ReplicationOrigin { sqlstate, origin, .. } if sqlstate == "53400" => format!(
                "PostgreSQL tracks at most max_replication_slots replication origins, for every database of the cluster; each pgtier node uses one per AWT apply lane, one for transactions spanning lanes and one per SWT slot, and they stay when a node is gone. Raise max_replication_slots (a PostgreSQL restart), or drop the origins of nodes that no longer run: SELECT pg_replication_origin_drop(roname) FROM pg_replication_origin WHERE roname LIKE 'pgtier\\_<node>\\_%' (this session's origin: {origin})."
            ),
            CacheError::ReplicationOrigin { sqlstate, .. } if sqlstate == "55006" => "Another PostgreSQL session holds this origin: another pgtier runs under this node name (give one of them another [cache] awt_node), or the session of a pgtier that was killed has not ended yet in PostgreSQL (write-through retries).".into(),
            CacheError::ReplicationOrigin { sqlstate, .. } if sqlstate == "42501" => "Write-through marks its changes with a replication origin so autorefresh does not apply them back: connect [backend] as a superuser, or GRANT EXECUTE ON FUNCTION pg_replication_origin_create(text), pg_replication_origin_oid(text), pg_replication_origin_session_setup(text) to its role.".into(),
            CacheError::ReplicationOrigin { .. } => return None,
            CacheError::Autorefresh { hint, .. } => return hint.clone(),
            CacheError::WrongNode(wrong) if let Some(owner) = &wrong.owner => format!(
                "Send the transaction to node \"{}\" at {}; pgtier.node_partitions in PostgreSQL maps keys to nodes.",
                owner.node, owner.addr
            ),
            CacheError::WrongNode(_) => {
                "No node of pgtier.node_partitions owns this key: declare the map again with ALTER CACHE GROUP ... PARTITION BY RANGE.".into()
            }
            CacheError::ShardScan { column, .. } => format!(
                "Each node caches only its range of {column}: bind {column} by equality (one node's instances), or ask PostgreSQL for the whole table."
            ),
            CacheError::SequenceUnavailable { block, .. } => format!(
                "pgtier takes this sequence's values from PostgreSQL in blocks of {block} ([cache] sequence_block) and has handed out its block; \
                 an INSERT that leaves the column to its default works again once PostgreSQL can be reached (one that supplies the value works now)."
            ),
            _ => return None,
        })
    }
}

fn owner_phrase(owner: Option<&crate::shard::NodeShard>) -> String {
    match owner {
        Some(owner) => format!("owned by node \"{}\" at {} (range {})", owner.node, owner.addr, owner.range_text()),
        None => "owned by no node of the partition map".into(),
    }
}

/// A PostgreSQL error met on a write-through or bookkeeping connection.
pub(crate) fn connection_error(error: &postgres::Error) -> CacheError {
    CacheError::Backend(pgtier_backend::BackendError::from_postgres("write-through", error))
}

/// Errors a pinned batch meets when an application commits on its rows
/// after the pin: the batch is redone an instance at a time.
pub(crate) fn is_conflict(error: &CacheError) -> bool {
    matches!(error, CacheError::Engine(e) if matches!(e.sqlstate(), "40001" | "55P03" | "23505"))
}

#[cfg(test)]
mod tests {
    use super::CacheError;

    #[test]
    fn an_origin_error_keeps_postgres_sqlstate_and_hints_by_it() {
        let error = |sqlstate: &str| CacheError::ReplicationOrigin {
            origin: "pgtier_n1_0".into(),
            sqlstate: sqlstate.into(),
            message: "m".into(),
        };
        assert_eq!(error("53400").sqlstate(), "53400");
        assert!(
            error("53400")
                .hint()
                .is_some_and(|h| h.contains("max_replication_slots") && h.contains("pg_replication_origin_drop"))
        );
        assert_eq!(error("42501").sqlstate(), "42501");
        assert!(error("42501").hint().is_some_and(|h| h.contains("GRANT EXECUTE")));
        assert!(error("55006").hint().is_some_and(|h| h.contains("awt_node")));
        assert_eq!(error("XX000").hint(), None, "no hint that guesses at another cause");
    }
}
