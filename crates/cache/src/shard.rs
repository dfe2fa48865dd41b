//! Node partitions ("shards"; not SQL's PARTITION BY): several pgtier
//! nodes in front of one PostgreSQL, each owning a half-open range
//! `[lo, hi)` of one cache group's root key (study 000's answer to one
//! server's limits: subscribers split by range over independent caches).
//!
//! The map is PostgreSQL's (`pgtier.node_partitions`, one row per group and
//! node), declared once by `ALTER CACHE GROUP g PARTITION BY RANGE (col)
//! NODES (...)` on any node, and readable by clients that route. A node
//! reads it when it creates the group and keeps its copy in the group's
//! durable definition (`persist`), so it answers after a restart without
//! PostgreSQL; a map changed later takes effect when the group is dropped
//! and created again on the nodes (a LOAD compares and refuses, 55000).
//!
//! What a node does with a key it does not own is refused with
//! [`WRONG_NODE`], the owner's name and address in the message and hint;
//! statements the node cannot answer exactly from its own range (a scan
//! that does not bind the root key by equality) are refused with 0A000.

use postgres::GenericClient;
use serde::{Deserialize, Serialize};

use pgtier_engine::Value;

use crate::error::{CacheError, connection_error};
use crate::node::validate_node_name;

/// SQLSTATE of a statement sent to a node that does not own its key. Class
/// 0A ("feature not supported": a client that knows only classes sees a
/// refusal, as for anything else this node cannot answer); subclass `P01`
/// is implementation-defined (the standard leaves subclasses starting with
/// I-Z to implementations), so a routing-aware client can tell it apart and
/// re-send to the owner named in the message and hint.
pub const WRONG_NODE: &str = "0AP01";

/// One node's range of the root key: `lo <= key < hi`, None unbounded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeShard {
    pub node: String,
    /// `host:port` where clients reach that node (for routing and messages).
    pub addr: String,
    pub lo: Option<i64>,
    pub hi: Option<i64>,
}

impl NodeShard {
    pub fn contains(&self, key: i64) -> bool {
        self.lo.is_none_or(|lo| key >= lo) && self.hi.is_none_or(|hi| key < hi)
    }

    /// `[lo, hi)` as text, for messages.
    pub fn range_text(&self) -> String {
        let lo = self.lo.map_or_else(|| "-inf".to_owned(), |v| v.to_string());
        let hi = self.hi.map_or_else(|| "+inf".to_owned(), |v| v.to_string());
        format!("[{lo}, {hi})")
    }
}

/// What a refusal for another node's key says (`CacheError::WrongNode`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrongNode {
    pub group: String,
    pub column: String,
    pub key: i64,
    /// This node.
    pub node: String,
    /// The node owning the key, None when no node of the map does.
    pub owner: Option<NodeShard>,
}

/// A group's partition map: which node owns which range of `column`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardMap {
    pub group: String,
    /// The root key column (one integer column).
    pub column: String,
    /// Ordered by `lo`, ranges disjoint.
    pub shards: Vec<NodeShard>,
}

impl ShardMap {
    /// The node owning `key`, if any does.
    pub fn owner(&self, key: i64) -> Option<&NodeShard> {
        self.shards.iter().find(|s| s.contains(key))
    }

    pub fn of_node(&self, node: &str) -> Option<&NodeShard> {
        self.shards.iter().find(|s| s.node == node)
    }

    /// Node names valid and distinct, each range non-empty, ranges disjoint.
    pub fn validate(&self) -> Result<(), CacheError> {
        let invalid = |reason: String| CacheError::InvalidSpec { group: self.group.clone(), reason };
        if self.shards.is_empty() {
            return Err(invalid("a partition map needs at least one node".into()));
        }
        for (i, shard) in self.shards.iter().enumerate() {
            validate_node_name(&shard.node)?;
            if self.shards[..i].iter().any(|s| s.node == shard.node) {
                return Err(invalid(format!("node \"{}\" is named twice in the partition map", shard.node)));
            }
            if let (Some(lo), Some(hi)) = (shard.lo, shard.hi)
                && lo >= hi
            {
                return Err(invalid(format!("the range of node \"{}\" is empty: {}", shard.node, shard.range_text())));
            }
            if let Some(before) = self.shards[..i].last()
                && (before.hi.is_none() || shard.lo.is_none() || before.hi > shard.lo)
            {
                return Err(invalid(format!(
                    "the ranges of nodes \"{}\" {} and \"{}\" {} overlap",
                    before.node,
                    before.range_text(),
                    shard.node,
                    shard.range_text()
                )));
            }
        }
        Ok(())
    }

    /// The refusal for `key` on node `this` (which does not own it).
    pub(crate) fn wrong_node(&self, this: &str, key: i64) -> CacheError {
        CacheError::WrongNode(Box::new(WrongNode {
            group: self.group.clone(),
            column: self.column.clone(),
            key,
            node: this.to_owned(),
            owner: self.owner(key).cloned(),
        }))
    }
}

/// `column >= lo AND column < hi` in PostgreSQL's SQL (None: no bound at all).
pub(crate) fn range_predicate(column: &str, shard: &NodeShard) -> Option<String> {
    let column = pgtier_backend::copy_out::quote_identifier(column);
    let parts: Vec<String> =
        [shard.lo.map(|lo| format!("{column} >= {lo}")), shard.hi.map(|hi| format!("{column} < {hi}"))]
            .into_iter()
            .flatten()
            .collect();
    (!parts.is_empty()).then(|| parts.join(" AND "))
}

/// A root key value as the map's integer (None: NULL or not an integer).
pub(crate) fn key_int(value: &Value) -> Option<i64> {
    match value {
        Value::Int2(v) => Some(i64::from(*v)),
        Value::Int4(v) => Some(i64::from(*v)),
        Value::Int8(v) => Some(*v),
        _ => None,
    }
}

/// The map of `group` as PostgreSQL holds it (schema current: `backend_schema::ensure`).
pub(crate) fn read<C: GenericClient>(client: &mut C, group: &str) -> Result<Option<ShardMap>, CacheError> {
    let rows = client
        .query(
            "SELECT col, node, addr, lo, hi FROM pgtier.node_partitions WHERE grp = $1 ORDER BY lo NULLS FIRST, node",
            &[&group],
        )
        .map_err(|e| connection_error(&e))?;
    let Some(first) = rows.first() else { return Ok(None) };
    let map = ShardMap {
        group: group.to_owned(),
        column: first.get(0),
        shards: rows
            .iter()
            .map(|row| NodeShard { node: row.get(1), addr: row.get(2), lo: row.get(3), hi: row.get(4) })
            .collect(),
    };
    map.validate()?;
    Ok(Some(map))
}

/// Replaces `map.group`'s map in PostgreSQL (one transaction).
pub(crate) fn declare(client: &mut postgres::Client, map: &ShardMap) -> Result<(), CacheError> {
    map.validate()?;
    let error = |e: postgres::Error| connection_error(&e);
    let mut txn = client.transaction().map_err(error)?;
    txn.execute("DELETE FROM pgtier.node_partitions WHERE grp = $1", &[&map.group]).map_err(error)?;
    for shard in &map.shards {
        txn.execute(
            "INSERT INTO pgtier.node_partitions (grp, node, col, addr, lo, hi) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&map.group, &shard.node, &map.column, &shard.addr, &shard.lo, &shard.hi],
        )
        .map_err(error)?;
    }
    txn.commit().map_err(error)
}

thread_local! {
    /// Set while pgtier itself evaluates a predicate over what this node
    /// caches (UNLOAD/REFRESH pick cached root keys): such scans are
    /// meant to see only this node's instances.
    static OWN_SCAN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with scans of node-partitioned tables allowed (this thread).
pub fn with_own_scans<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            OWN_SCAN.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(OWN_SCAN.with(|c| c.replace(true)));
    f()
}

pub(crate) fn own_scans() -> bool {
    OWN_SCAN.with(std::cell::Cell::get)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::{NodeShard, ShardMap, range_predicate};
    use crate::statement::{CacheStatement, parse_cache_statement};

    #[test]
    fn the_statement() {
        let sql = "ALTER CACHE GROUP tatp PARTITION BY RANGE (s_id) NODES (n1 '127.0.0.1:5433' TO 1001, \
                   n2 'h2:5434' TO 2001, n3 'h3:5435' FROM 3001);";
        let Some(Ok(CacheStatement::Partition(map))) = parse_cache_statement(sql) else { panic!("{sql}") };
        assert_eq!(map.group, "tatp");
        assert_eq!(map.column, "s_id");
        assert_eq!(
            map.shards[0],
            NodeShard { node: "n1".into(), addr: "127.0.0.1:5433".into(), lo: None, hi: Some(1001) }
        );
        assert_eq!((map.shards[1].lo, map.shards[1].hi), (Some(1001), Some(2001)));
        assert_eq!((map.shards[2].lo, map.shards[2].hi), (Some(3001), None));
        assert_eq!(CacheStatement::Partition(map).command(), "ALTER CACHE GROUP");
        for bad in [
            "ALTER CACHE GROUP g PARTITION BY RANGE (s_id) NODES (n1 TO 5)",
            "ALTER CACHE GROUP g PARTITION BY RANGE (s_id) NODES (n1 'a' TO 5, n2 'b' FROM 3)",
            "ALTER CACHE GROUP g PARTITION BY HASH (s_id) NODES (n1 'a')",
            "ALTER CACHE GROUP g PARTITION BY RANGE (s_id) NODES (n1 'a' TO 5",
        ] {
            assert!(matches!(parse_cache_statement(bad), Some(Err(_))), "{bad}");
        }
    }

    fn shard(node: &str, lo: Option<i64>, hi: Option<i64>) -> NodeShard {
        NodeShard { node: node.into(), addr: format!("{node}:5432"), lo, hi }
    }

    #[test]
    fn owners_and_ranges() {
        let map = ShardMap {
            group: "g".into(),
            column: "s_id".into(),
            shards: vec![shard("n1", None, Some(100)), shard("n2", Some(100), Some(200)), shard("n3", Some(200), None)],
        };
        map.validate().unwrap();
        assert_eq!(map.owner(-5).unwrap().node, "n1");
        assert_eq!(map.owner(99).unwrap().node, "n1");
        assert_eq!(map.owner(100).unwrap().node, "n2");
        assert_eq!(map.owner(1 << 40).unwrap().node, "n3");
        assert_eq!(range_predicate("s_id", &map.shards[1]).unwrap(), "\"s_id\" >= 100 AND \"s_id\" < 200");
        assert_eq!(range_predicate("s_id", &map.shards[0]).unwrap(), "\"s_id\" < 100");
        let error = map.wrong_node("n1", 150);
        assert_eq!(error.sqlstate(), "0AP01");
        assert!(error.to_string().contains("\"n2\""), "{error}");
        assert!(error.hint().unwrap().contains("n2:5432"));
        let gap =
            ShardMap { shards: vec![shard("n1", None, Some(10)), shard("n2", Some(20), Some(30))], ..map.clone() };
        gap.validate().unwrap();
        assert!(gap.owner(15).is_none());
        assert!(gap.wrong_node("n1", 15).to_string().contains("no node"));
        for bad in [
            vec![shard("n1", None, Some(10)), shard("n2", Some(5), None)],
            vec![shard("n1", None, None), shard("n2", Some(5), None)],
            vec![shard("n1", Some(10), Some(10))],
            vec![shard("n1", None, Some(10)), shard("n1", Some(10), None)],
            vec![shard("N1", None, None)],
            vec![],
        ] {
            assert!(ShardMap { shards: bad.clone(), ..map.clone() }.validate().is_err(), "{bad:?}");
        }
    }
}
