//! Search-path resolution (PostgreSQL's catalog/namespace.c): the schemas
//! of the `search_path` setting that exist, how a written relation name is
//! resolved through them (RangeVarGetRelid), where CREATE puts a new
//! relation, and how a stored name is shown under the path (`regclass`).
//! The string rules of stored names are `crate::names`.

use std::sync::Arc;

use pgtier_engine::Catalog;

use super::{NS_PUBLIC, Schema, SystemRel, user_schema_named};
use crate::error::{Result, SqlError};
use crate::names::{PUBLIC, is_temp_schema, split, split_path, stored};

/// The OID of the schema a stored name is in (public's when the schema is
/// gone, which a committed catalog never shows).
pub fn namespace_oid(catalog: &Catalog, stored: &str) -> i64 {
    match split(stored) {
        (PUBLIC, _) => NS_PUBLIC,
        (s, _) => user_schema_named(catalog, s).map_or(NS_PUBLIC, |u| u.oid),
    }
}

/// A stored name as `regclass` prints it: qualified unless its schema is
/// on the search path (and the name is not found earlier on it).
pub fn display(stored: &str, path: &SearchPath) -> String {
    let (schema, name) = split(stored);
    let q = super::quote_ident(name);
    if path.schemas.iter().any(|s| s == schema) || (schema == path.temp && path.temp_exists) {
        q
    } else {
        format!("{}.{q}", super::quote_ident(schema))
    }
}

/// Refuses a relation or schema name pgtier could not store unambiguously.
pub fn check_new(name: &str) -> Result<()> {
    if name.contains('.') {
        return Err(SqlError::unsupported(format!("a name containing \".\" (\"{name}\")")));
    }
    Ok(())
}

/// The search path as name resolution uses it: the schemas of the
/// `search_path` setting that exist, in order (`$user` replaced by the
/// session user's schema when there is one).
#[derive(Clone, Debug)]
pub struct SearchPath {
    /// The setting's text: a plan bound under one text is bound again when
    /// it changes (plan::Prepared::search_path).
    pub raw: Arc<str>,
    pub schemas: Vec<String>,
    /// The session user `$user` stands for.
    pub user: String,
    /// The session's temporary schema (`pg_temp_N`), whether or not it
    /// exists yet: CREATE TEMP TABLE makes it.
    pub temp: String,
    /// It exists: it is searched first for relations unless `pg_temp` is
    /// placed in the path.
    temp_exists: bool,
    /// `pg_temp` leads the path: unqualified CREATEs make temporary
    /// relations, as PostgreSQL's creation namespace is then the temporary one.
    temp_first: bool,
}

/// search_path's default: the path view queries are bound under.
pub const DEFAULT_PATH: &str = "\"$user\", public";

impl SearchPath {
    pub fn new(raw: Arc<str>, user: &str, temp: &str, catalog: &Catalog) -> SearchPath {
        let mut schemas: Vec<String> = Vec::new();
        let parts = split_path(&raw);
        let temp_first = parts.first().is_some_and(|p| p == "pg_temp");
        for part in parts {
            let name = match part.as_str() {
                "$user" => user.to_owned(),
                "pg_temp" => temp.to_owned(),
                _ => part,
            };
            let exists = matches!(name.as_str(), PUBLIC | "pg_catalog" | "information_schema")
                || user_schema_named(catalog, &name).is_some();
            if exists && !schemas.contains(&name) {
                schemas.push(name);
            }
        }
        let temp_exists = user_schema_named(catalog, temp).is_some();
        SearchPath { raw, schemas, user: user.to_owned(), temp: temp.to_owned(), temp_exists, temp_first }
    }

    /// The default path for the same user and catalog; None when this is it.
    pub fn default_path(&self, catalog: &Catalog) -> Option<SearchPath> {
        (*self.raw != *DEFAULT_PATH).then(|| SearchPath::new(Arc::from(DEFAULT_PATH), &self.user, &self.temp, catalog))
    }

    /// The schemas an unqualified relation name is looked up in: pg_catalog
    /// first unless the path places it.
    pub fn lookup_order(&self) -> impl Iterator<Item = &str> {
        let temp = (self.temp_exists && !self.schemas.contains(&self.temp)).then_some(self.temp.as_str());
        let implicit = (!self.schemas.iter().any(|s| s == "pg_catalog")).then_some("pg_catalog");
        temp.into_iter().chain(implicit).chain(self.schemas.iter().map(String::as_str))
    }

    /// Where CREATE puts an unqualified relation: the path's first schema
    /// (the temporary one only for CREATE TEMP).
    pub fn creation_schema(&self) -> Result<&str> {
        if self.temp_first {
            return Ok(&self.temp);
        }
        self.schemas
            .iter()
            .map(String::as_str)
            .find(|s| *s != self.temp)
            .ok_or_else(|| SqlError::new("3F000", "no schema has been selected to create in"))
    }

    /// The schema a written schema name means: `pg_temp` is the session's
    /// temporary schema.
    fn schema_named<'a>(&'a self, written: &'a str) -> &'a str {
        if written == "pg_temp" { &self.temp } else { written }
    }
}

/// What a written relation name refers to.
pub enum Target {
    System(SystemRel),
    /// A stored name that `exists` accepted.
    Stored(String),
}

/// Resolves `parts` (`[name]` or `[schema, name]`) as PostgreSQL's
/// RangeVarGetRelid does: a qualified name in its schema (3F000 when that
/// does not exist), an unqualified one in each schema of the path in turn.
/// `exists` says whether a stored name is a relation of the kind wanted.
/// None: no such relation.
pub fn resolve(
    catalog: &Catalog,
    path: &SearchPath,
    parts: &[String],
    exists: impl Fn(&str) -> bool,
) -> Result<Option<Target>> {
    let in_schema = |schema: &str, name: &str| -> Option<Target> {
        match schema {
            "pg_catalog" => SystemRel::find(Schema::PgCatalog, name).map(Target::System),
            "information_schema" => SystemRel::find(Schema::InformationSchema, name).map(Target::System),
            s => {
                let key = stored(s, name);
                exists(&key).then_some(Target::Stored(key))
            }
        }
    };
    match parts {
        [name] => Ok(path.lookup_order().find_map(|s| in_schema(s, name))),
        [schema, name] => {
            let schema = path.schema_named(schema);
            schema_exists(catalog, schema)?;
            if is_temp_schema(schema) && schema != path.temp {
                return Err(SqlError::unsupported("accessing temporary tables of other sessions"));
            }
            Ok(in_schema(schema, name))
        }
        _ => {
            Err(SqlError::new("42601", format!("improper relation name (too many dotted names): {}", parts.join("."))))
        }
    }
}

/// The stored name a new relation written `parts` gets: in its schema, or
/// in the path's creation schema. System schemas take no relations.
pub fn creation_target(catalog: &Catalog, path: &SearchPath, parts: &[String]) -> Result<String> {
    let (schema, name) = match parts {
        [name] => (path.creation_schema()?, name),
        [schema, name] if path.schema_named(schema) == path.temp => {
            return temp_target(path, std::slice::from_ref(name));
        }
        [schema, name] => {
            schema_exists(catalog, schema)?;
            if is_temp_schema(schema) {
                return Err(SqlError::unsupported("creating relations in temporary schemas of other sessions"));
            }
            (schema.as_str(), name)
        }
        _ => {
            return Err(SqlError::new(
                "42601",
                format!("improper relation name (too many dotted names): {}", parts.join(".")),
            ));
        }
    };
    check_new(name)?;
    if matches!(schema, "pg_catalog" | "information_schema") {
        return Err(SqlError::new("42501", format!("permission denied to create \"{schema}.{name}\""))
            .with_detail("System catalog modifications are currently disallowed."));
    }
    Ok(stored(schema, name))
}

/// The stored name of a new temporary relation written `parts`: in the
/// session's temporary schema (made by the executor on first use).
pub fn temp_target(path: &SearchPath, parts: &[String]) -> Result<String> {
    match parts {
        [name] => {
            check_new(name)?;
            Ok(stored(&path.temp, name))
        }
        [schema, name] if path.schema_named(schema) == path.temp => temp_target(path, std::slice::from_ref(name)),
        [_, _] => Err(SqlError::new("42P16", "cannot create temporary relation in non-temporary schema")),
        _ => {
            Err(SqlError::new("42601", format!("improper relation name (too many dotted names): {}", parts.join("."))))
        }
    }
}

fn schema_exists(catalog: &Catalog, schema: &str) -> Result<()> {
    if matches!(schema, PUBLIC | "pg_catalog" | "information_schema") || user_schema_named(catalog, schema).is_some() {
        Ok(())
    } else {
        Err(SqlError::new("3F000", format!("schema \"{schema}\" does not exist")))
    }
}
