//! Relation names and schemas: how a relation in a schema of CREATE
//! SCHEMA's is stored, how a written name is resolved through search_path,
//! and how a stored name is shown. Every other module goes through here.
//!
//! The engine keeps one flat namespace of relation names. A relation of
//! schema `public` is stored under its own name (as before schemas held
//! relations, so nothing on disk changed); one of schema `s` as `s.t`. A
//! stored name holds a `.` exactly when its relation is outside public:
//! schema and relation names with a `.` are refused (0A000), so `split`
//! needs no catalog. Indexes and sequences follow the same rule, so the
//! names pgtier derives by appending (`t_pkey`, `t_id_seq`) land in the
//! table's schema, as PostgreSQL puts them.

use std::sync::Arc;

use pgtier_engine::Catalog;

use crate::catalog::{NS_PUBLIC, Schema, SystemRel, user_schema_named};
use crate::error::{Result, SqlError};

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
    let q = crate::catalog::quote_ident(name);
    if path.schemas.iter().any(|s| s == schema) || (schema == path.temp && path.temp_exists) {
        q
    } else {
        format!("{}.{q}", crate::catalog::quote_ident(schema))
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

/// True for a schema holding some session's temporary relations.
pub fn is_temp_schema(schema: &str) -> bool {
    schema.starts_with("pg_temp_")
}

fn schema_exists(catalog: &Catalog, schema: &str) -> Result<()> {
    if matches!(schema, PUBLIC | "pg_catalog" | "information_schema") || user_schema_named(catalog, schema).is_some() {
        Ok(())
    } else {
        Err(SqlError::new("3F000", format!("schema \"{schema}\" does not exist")))
    }
}

/// Name resolution for the binder: every relation name a statement
/// writes goes through one of these.
impl crate::bind::Binder<'_> {
    /// The stored name of the existing relation (table, view, sequence or
    /// index) `name` refers to through the search path; None when there
    /// is none (a system relation counts as none: it is not stored).
    pub(crate) fn stored_relation(&self, name: &sqlparser::ast::ObjectName) -> Result<Option<String>> {
        let catalog = self.catalog;
        let exists = |k: &str| catalog.table_by_name(k).is_some() || catalog.index_by_name(k).is_some();
        Ok(match resolve(catalog, self.path, &crate::bind::parts(name)?, exists)? {
            Some(Target::Stored(k)) => Some(k),
            Some(Target::System(_)) | None => None,
        })
    }

    /// What `name` refers to among stored relations and system ones, as a
    /// query reads it: a schema that does not exist holds nothing (42P01
    /// for the caller, as PostgreSQL's parser reports it).
    pub(crate) fn target(&self, name: &sqlparser::ast::ObjectName) -> Result<Option<Target>> {
        let catalog = self.catalog;
        match resolve(catalog, self.path, &crate::bind::parts(name)?, |k| catalog.table_by_name(k).is_some()) {
            Err(e) if e.sqlstate == "3F000" => Ok(None),
            other => other,
        }
    }

    /// The stored name of the existing relation `name` refers to, or for a
    /// missing one a stored name no relation has (a statement with IF
    /// EXISTS goes on; without, the executor says it does not exist).
    pub(crate) fn relation_key(&self, name: &sqlparser::ast::ObjectName) -> Result<String> {
        if let Some(k) = self.stored_relation(name)? {
            return Ok(k);
        }
        Ok(match crate::bind::parts(name)?.as_slice() {
            [n] => stored(self.path.schemas.first().map_or("pg_catalog", String::as_str), n),
            [s, n] => stored(s, n),
            _ => name.to_string(),
        })
    }

    /// The stored name a relation created as `name` gets (in the
    /// temporary schema while a CREATE TEMP TABLE is bound).
    pub(crate) fn new_relation_key(&self, name: &sqlparser::ast::ObjectName) -> Result<String> {
        if self.creating_temp {
            return temp_target(self.path, &crate::bind::parts(name)?);
        }
        creation_target(self.catalog, self.path, &crate::bind::parts(name)?)
    }

    /// The stored name a temporary relation created as `name` gets.
    pub(crate) fn new_temp_key(&self, name: &sqlparser::ast::ObjectName) -> Result<String> {
        temp_target(self.path, &crate::bind::parts(name)?)
    }

    /// CREATE TEMP TABLE: the CREATE TABLE (or AS) bound with its name in
    /// the session's temporary schema, and its ON COMMIT action.
    pub(crate) fn create_temp_table(&mut self, c: &sqlparser::ast::CreateTable) -> Result<crate::plan::Plan> {
        use crate::plan::{OnCommit, Plan};
        let on_commit = match c.on_commit {
            None | Some(sqlparser::ast::OnCommit::PreserveRows) => OnCommit::PreserveRows,
            Some(sqlparser::ast::OnCommit::DeleteRows) => OnCommit::DeleteRows,
            Some(sqlparser::ast::OnCommit::Drop) => OnCommit::Drop,
        };
        let mut plain = c.clone();
        plain.temporary = false;
        plain.on_commit = None;
        self.creating_temp = true;
        let create = self.create_table(&plain);
        self.creating_temp = false;
        let create = create?;
        if let Plan::CreateTable { def, .. } | Plan::CreateTableAs { def, .. } = &create
            && def.foreign_keys.iter().any(|fk| !is_temp_schema(split(&fk.parent_table).0))
        {
            return Err(SqlError::new("42P16", "constraints on temporary tables may reference only temporary tables"));
        }
        Ok(Plan::CreateTemp { create: Box::new(create), on_commit })
    }

    /// A new index, sequence or constraint-named relation belonging to
    /// table `table` (stored name): in the table's schema, as PostgreSQL
    /// puts an index, whatever the search path says.
    pub(crate) fn beside(&self, table: &str, name: &sqlparser::ast::ObjectName) -> Result<String> {
        match crate::bind::parts(name)?.as_slice() {
            [n] => {
                check_new(n)?;
                Ok(stored(split(table).0, n))
            }
            [s, n] if s == split(table).0 => {
                check_new(n)?;
                Ok(stored(s, n))
            }
            [_, _] => Err(SqlError::new("42P16", "index and table must be in the same schema")
                .with_detail("pgtier creates an index in its table's schema.")),
            _ => Err(SqlError::new("42601", format!("improper qualified name (too many dotted names): {name}"))),
        }
    }
}

impl crate::bind::Scope<'_> {
    /// The FROM item `t.*` or `s.t.*` names: by reference name, and for
    /// `s.t` one whose relation is in schema `s`.
    pub(crate) fn qualified(&self, name: &sqlparser::ast::ObjectName) -> Result<&crate::bind::Rel> {
        let p = crate::bind::parts(name)?;
        let (schema, q) = match p.as_slice() {
            [q] => (None, q),
            [s, q] => (Some(s.as_str()), q),
            _ => return Err(SqlError::unsupported(format!("name {name}"))),
        };
        self.rels
            .iter()
            .find(|r| r.name == *q && schema.is_none_or(|s| r.schema_name() == Some(s)))
            .ok_or_else(|| SqlError::new("42P01", format!("missing FROM-clause entry for table \"{q}\"")))
    }
}
