//! Group definitions are durable in the engine catalog: the root table's
//! annotation holds the whole definition (the statement and PostgreSQL's
//! table definitions as imported), each child's annotation names its group.
//! They are written in the engine transaction that creates the tables and
//! dropped with them, so a crash never leaves a group without its tables or
//! tables that claim a group that does not exist. At open the registry is
//! rebuilt from them without asking PostgreSQL (a cache whose backend is down
//! still answers); loads compare PostgreSQL's tables with the stored
//! definitions before reading (55000 when they changed).

use pgtier_backend::catalog::TableDef as PgTable;
use pgtier_engine::Catalog;
use serde::{Deserialize, Serialize};

use crate::error::CacheError;
use crate::group::{CacheGroup, GroupSpec, build_group};
use crate::shard::ShardMap;
use crate::statement::CreateGroup;

/// Bumped when the stored shape changes incompatibly.
const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize)]
struct RootAnnotation {
    pgtier_cache_group: u32,
    definition: CreateGroup,
    /// In group order: root first, every parent before its children.
    tables: Vec<PgTable>,
    /// Per table, the definition fingerprint accepted since
    /// (`ALTER CACHE GROUP ... ACCEPT DEFINITION`); empty: the tables' own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    accepted: Vec<u64>,
    /// The node partition map read from PostgreSQL when the group was
    /// created (`shard.rs`); None: the group is not partitioned over nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shards: Option<ShardMap>,
}

#[derive(Serialize, Deserialize)]
struct MemberAnnotation {
    pgtier_cache_group: u32,
    member_of: String,
}

/// Sets the annotations on `group`'s engine table definitions.
pub(crate) fn annotate(def: &CreateGroup, group: &mut CacheGroup, shards: Option<&ShardMap>) -> Result<(), CacheError> {
    let text = root_annotation(def, group, &[], shards)?;
    let member = MemberAnnotation { pgtier_cache_group: FORMAT, member_of: def.name.clone() };
    let member_text = serde_json::to_string(&member).map_err(|error| cannot_store(def, &error))?;
    for (index, table) in group.tables.iter_mut().enumerate() {
        table.def.annotation = Some(if index == 0 { text.clone() } else { member_text.clone() });
    }
    Ok(())
}

/// The root table's annotation, with `accepted` fingerprints (empty: the tables' own).
pub(crate) fn root_annotation(
    def: &CreateGroup,
    group: &CacheGroup,
    accepted: &[u64],
    shards: Option<&ShardMap>,
) -> Result<String, CacheError> {
    let own: Vec<u64> = group.tables.iter().map(|t| t.source.fingerprint()).collect();
    let accepted = if accepted == own.as_slice() { Vec::new() } else { accepted.to_vec() };
    let root = RootAnnotation {
        pgtier_cache_group: FORMAT,
        definition: def.clone(),
        tables: group.tables.iter().map(|t| t.source.clone()).collect(),
        accepted,
        shards: shards.cloned(),
    };
    serde_json::to_string(&root).map_err(|error| cannot_store(def, &error))
}

fn cannot_store(def: &CreateGroup, error: &serde_json::Error) -> CacheError {
    CacheError::InvalidSpec { group: def.name.clone(), reason: format!("cannot store the definition: {error}") }
}

/// A group as the engine catalog holds it: definition, tables, the
/// fingerprints accepted for its tables (in group order), its node partitions.
pub(crate) type Restored = (CreateGroup, CacheGroup, Vec<u64>, Option<ShardMap>);

/// Every group whose definition the engine catalog holds.
pub(crate) fn restore(catalog: &Catalog) -> Result<Vec<Restored>, CacheError> {
    let mut groups = Vec::new();
    for table in catalog.tables() {
        let Some(text) = table.annotation.as_deref() else { continue };
        if !text.starts_with("{\"pgtier_cache_group\"") || serde_json::from_str::<MemberAnnotation>(text).is_ok() {
            continue;
        }
        let stored: RootAnnotation = serde_json::from_str(text).map_err(|error| CacheError::InvalidSpec {
            group: table.name.clone(),
            reason: format!("the stored definition on table \"{}\" cannot be read: {error}", table.name),
        })?;
        if stored.pgtier_cache_group != FORMAT {
            return Err(CacheError::InvalidSpec {
                group: stored.definition.name.clone(),
                reason: format!("stored in format {} but this pgtier reads format {FORMAT}", stored.pgtier_cache_group),
            });
        }
        let def = stored.definition;
        let spec = GroupSpec {
            name: def.name.clone(),
            root: def.root.clone(),
            children: def.children.clone(),
            kind: def.kind,
        };
        let mut group = build_group(&spec, stored.tables)?;
        annotate(&def, &mut group, stored.shards.as_ref())?;
        let accepted = if stored.accepted.len() == group.tables.len() {
            stored.accepted
        } else {
            group.tables.iter().map(|t| t.source.fingerprint()).collect()
        };
        groups.push((def, group, accepted, stored.shards));
    }
    Ok(groups)
}
