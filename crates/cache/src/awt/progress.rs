//! AWT's progress rows in PostgreSQL (`pgtier.awt_progress`) as read: per
//! (group, lane) of this node's incarnation, the position before which its
//! commits are applied there. AWT sessions read them at start; a load reads
//! its group's inside its snapshot (`fence`), so this file imports nothing
//! of AWT's machinery. Writing them is AWT's (`statements`).

use std::collections::BTreeMap;

use pgtier_engine::Lsn;

use crate::error::{CacheError, connection_error};
use crate::node::NodeIdentity;

/// A progress row: (group, lane).
pub(crate) type Stream = (String, usize);

/// Where this session's progress rows stand: per (group, lane), and the
/// rows from before incarnation ids (group ""), which stand for every group.
#[derive(Clone, Debug, Default)]
pub(crate) struct Positions {
    rows: BTreeMap<Stream, u64>,
}

impl Positions {
    pub fn get(&self, group: &str, lane: usize) -> u64 {
        self.rows.get(&(group.to_owned(), lane)).or_else(|| self.rows.get(&(String::new(), lane))).copied().unwrap_or(0)
    }

    /// Whether PostgreSQL has the transaction at `lsn` whose progress rows
    /// are `streams` (applied before a crash that came before the local
    /// acknowledgement).
    pub fn has(&self, lsn: Lsn, streams: &[Stream]) -> bool {
        !streams.is_empty() && streams.iter().all(|(group, lane)| lsn.0 < self.get(group, *lane))
    }

    /// The furthest position any row stands at (0 without rows).
    pub fn furthest(&self) -> u64 {
        self.rows.values().copied().max().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The lane count the rows were written with.
    pub fn lanes(&self) -> usize {
        self.rows.keys().map(|(_, lane)| lane + 1).max().unwrap_or(0)
    }

    /// The one position every row stands at, when they agree.
    pub fn common(&self) -> Option<u64> {
        let first = *self.rows.values().next()?;
        self.rows.values().all(|&p| p == first).then_some(first)
    }

    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self.rows.keys().map(|(g, _)| g.clone()).filter(|g| !g.is_empty()).collect();
        groups.dedup();
        groups
    }
}

/// This node's progress rows (its own incarnation's only).
pub(crate) fn read_progress<C: postgres::GenericClient>(
    client: &mut C,
    node: &NodeIdentity,
    group: Option<&str>,
) -> Result<Positions, CacheError> {
    let rows = client
        .query(
            "SELECT grp, stream, next_lsn FROM pgtier.awt_progress WHERE node = $1 AND incarnation = $2 AND ($3::text IS NULL OR grp IN ($3, ''))",
            &[&node.name, &node.incarnation, &group],
        )
        .map_err(|e| connection_error(&e))?;
    let mut positions = Positions::default();
    for row in &rows {
        let lane = usize::try_from(row.get::<_, i32>(1)).unwrap_or(0);
        positions.rows.insert((row.get(0), lane), u64::try_from(row.get::<_, i64>(2)).unwrap_or(0));
    }
    Ok(positions)
}

/// Per lane, the position before which group `group`'s commits are in
/// PostgreSQL, read in the caller's snapshot (a load's: `fence`); the lane
/// count is the vector's length.
pub(crate) fn read_group_progress<C: postgres::GenericClient>(
    client: &mut C,
    node: &NodeIdentity,
    group: &str,
) -> Result<Vec<u64>, CacheError> {
    let positions = read_progress(client, node, Some(group))?;
    Ok((0..positions.lanes().max(1)).map(|lane| positions.get(group, lane)).collect())
}
