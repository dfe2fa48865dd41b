//! Relation names as strings: how a relation in a schema of CREATE
//! SCHEMA's is stored and how a stored name splits. Pure string rules that
//! import nothing of the crate, so the error texts can use them; resolving
//! a written name through search_path is `catalog::search_path`, the
//! binder's relation names `bind::relation_names`.
//!
//! The engine keeps one flat namespace of relation names. A relation of
//! schema `public` is stored under its own name (as before schemas held
//! relations, so nothing on disk changed); one of schema `s` as `s.t`. A
//! stored name holds a `.` exactly when its relation is outside public:
//! schema and relation names with a `.` are refused (0A000), so `split`
//! needs no catalog. Indexes and sequences follow the same rule, so the
//! names pgtier derives by appending (`t_pkey`, `t_id_seq`) land in the
//! table's schema, as PostgreSQL puts them.

pub const PUBLIC: &str = "public";

/// The setting (hidden, read-only) that names the session's temporary
/// schema, so the `reg*` conversions resolve as the binder does.
pub const TEMP_SCHEMA_SETTING: &str = "pgtier.temp_schema";

/// The engine's name for relation `name` of schema `schema`.
pub fn stored(schema: &str, name: &str) -> String {
    if schema == PUBLIC { name.to_owned() } else { format!("{schema}.{name}") }
}

/// Schema and relation name of a stored name.
pub fn split(stored: &str) -> (&str, &str) {
    stored.split_once('.').unwrap_or((PUBLIC, stored))
}

/// The relation name of a stored name, without its schema.
pub fn short(stored: &str) -> &str {
    split(stored).1
}

/// The entries of a search_path setting, unquoted (unquoted ones lowered).
pub fn split_path(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
            Some(q) => q.replace("\"\"", "\""),
            None => s.to_lowercase(),
        })
        .collect()
}

/// True for a schema holding some session's temporary relations.
pub fn is_temp_schema(schema: &str) -> bool {
    schema.starts_with("pg_temp_")
}
