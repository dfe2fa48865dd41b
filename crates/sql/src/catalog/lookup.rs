//! Catalog objects by name and by OID, as the `reg*` types convert them
//! (`'t'::regclass`, `oid::regtype::text`).

use std::collections::HashMap;

use pgtier_engine::Catalog;

use super::{
    NS_INFORMATION_SCHEMA, NS_PG_CATALOG, NS_PG_TOAST, NS_PUBLIC, RELATIONS, Schema, format_type, index_by_oid,
    index_oid, namespace_name, quote_ident, table_by_oid, table_oid, type_by_name, type_by_oid,
};
use crate::error::{Result, SqlError};
use crate::value::types::RegKind;

/// The name an oid of a `reg*` type prints as (the oid when nothing has it).
pub fn reg_name(catalog: &Catalog, settings: &HashMap<String, String>, kind: RegKind, oid: i64) -> String {
    let name = match kind {
        RegKind::Class => {
            let user = table_by_oid(catalog, oid)
                .map(|t| t.name.clone())
                .or_else(|| index_by_oid(catalog, oid).map(|i| i.name.clone()));
            match user {
                Some(n) => Some(crate::catalog::search_path::display(&n, &path_of(catalog, settings))),
                None => RELATIONS.iter().find(|r| r.oid == oid).map(|r| match r.schema {
                    Schema::PgCatalog => r.name.to_owned(),
                    Schema::InformationSchema => format!("information_schema.{}", r.name),
                }),
            }
        }
        RegKind::Type => type_by_oid(oid).map(|_| format_type(oid, None)),
        RegKind::Namespace => namespace_name(oid).map(str::to_owned).or_else(|| {
            super::schemas::user_schemas(catalog).into_iter().find(|s| s.oid == oid).map(|s| quote_ident(&s.name))
        }),
        RegKind::Role => {
            let session = settings.get("session_authorization").map_or("", String::as_str);
            super::roles::ShownRoles::of(catalog, session).name(oid).map(quote_ident)
        }
    };
    name.unwrap_or_else(|| oid.to_string())
}

/// The session's search path as the `reg*` conversions (and
/// current_schemas) resolve with it.
pub(crate) fn path_of(
    catalog: &Catalog,
    settings: &HashMap<String, String>,
) -> crate::catalog::search_path::SearchPath {
    let raw = settings.get("search_path").map_or("\"$user\", public", String::as_str);
    let user = settings.get("session_authorization").map_or("", String::as_str);
    let temp = settings.get(crate::names::TEMP_SCHEMA_SETTING).map_or("", String::as_str);
    crate::catalog::search_path::SearchPath::new(std::sync::Arc::from(raw), user, temp, catalog)
}

/// Splits `schema.name` (either part possibly double-quoted).
pub fn split_qualified(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = text.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            '"' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut cur)),
            c if quoted => cur.push(c),
            c => cur.push(c.to_ascii_lowercase()),
        }
    }
    parts.push(cur);
    parts
}

/// `'name'::regclass` and friends: the object's OID, or PostgreSQL's error.
pub fn reg_lookup(catalog: &Catalog, settings: &HashMap<String, String>, kind: RegKind, text: &str) -> Result<i64> {
    reg_lookup_in(catalog, &path_of(catalog, settings), settings, kind, text)
}

/// [`reg_lookup`] with relation names resolved through `path`.
pub fn reg_lookup_in(
    catalog: &Catalog,
    path: &crate::catalog::search_path::SearchPath,
    settings: &HashMap<String, String>,
    kind: RegKind,
    text: &str,
) -> Result<i64> {
    let t = text.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        return t.parse::<i64>().map_err(|_| SqlError::invalid_text("oid", text));
    }
    match kind {
        RegKind::Class => {
            let parts = split_qualified(t);
            let (schema, name) = match parts.as_slice() {
                [n] => (None, n.as_str()),
                [s, n] => (Some(s.as_str()), n.as_str()),
                _ => {
                    return Err(SqlError::new(
                        "42601",
                        format!("improper relation name (too many dotted names): {text}"),
                    ));
                }
            };
            let missing = || SqlError::new("42P01", format!("relation \"{t}\" does not exist"));
            let written: Vec<String> = schema.into_iter().chain([name]).map(str::to_owned).collect();
            let exists = |k: &str| catalog.table_by_name(k).is_some() || catalog.index_by_name(k).is_some();
            match crate::catalog::search_path::resolve(catalog, path, &written, exists)? {
                Some(crate::catalog::search_path::Target::System(r)) => Ok(r.def().oid),
                Some(crate::catalog::search_path::Target::Stored(k)) => catalog
                    .table_by_name(&k)
                    .map(|t| table_oid(t))
                    .or_else(|| catalog.index_by_name(&k).map(|i| index_oid(i)))
                    .ok_or_else(missing),
                None => Err(missing()),
            }
        }
        RegKind::Type => {
            let lowered = t.to_lowercase();
            type_by_name(&lowered).ok_or_else(|| SqlError::new("42704", format!("type \"{t}\" does not exist")))
        }
        RegKind::Namespace => {
            let n = split_qualified(t).pop().unwrap_or_default();
            [NS_PG_CATALOG, NS_PUBLIC, NS_INFORMATION_SCHEMA, NS_PG_TOAST]
                .into_iter()
                .find(|o| namespace_name(*o) == Some(n.as_str()))
                .or_else(|| super::schemas::user_schema_named(catalog, &n).map(|s| s.oid))
                .ok_or_else(|| SqlError::new("3F000", format!("schema \"{t}\" does not exist")))
        }
        RegKind::Role => {
            let session = settings.get("session_authorization").map_or("", String::as_str);
            let name = split_qualified(t).pop().unwrap_or_default();
            match super::roles::ShownRoles::of(catalog, session).oid(&name) {
                0 => Err(SqlError::new("42704", format!("role \"{t}\" does not exist"))),
                oid => Ok(oid),
            }
        }
    }
}
