//! Roles and privileges, PostgreSQL's model: roles with attributes
//! (SUPERUSER, LOGIN, CREATEROLE, CONNECTION LIMIT, a SCRAM verifier),
//! membership, owners of relations and schemas, and ACLs (`aclitem[]`).
//!
//! Where they live: one engine table without rows under a name no SQL
//! identifier can spell (as schemas.rs keeps schemas), whose annotation is
//! the whole [`AuthDoc`] as JSON. So CREATE ROLE, GRANT and the rest are
//! DDL: transactional (a ROLLBACK undoes a GRANT), logged, recovered and
//! serialized by the engine's DDL lock, with nothing new in the engine.
//! Relations are keyed by their stored name (engine ids change when ALTER
//! TABLE rewrites a table); DROP and RENAME keep the document in step in
//! the same transaction (`exec/roles.rs`: `prune_acls`, `rename_relation_acl`).
//!
//! Who is a superuser: a role with SUPERUSER, a bootstrap role (a user of
//! the server's configuration file, registered at start, `bootstrap`), and
//! every session the server did not authenticate (`SessionAuth::trusted`:
//! the embedded API, whose caller owns the data directory). Without a
//! document (no role was ever made, no server registered its users) every
//! session is a superuser, as before roles existed.
//!
//! Reading the document costs one parse per change of it: a session keeps
//! the parsed document with the engine table it came from
//! (`SessionAuth::doc`), and a pointer comparison tells whether it is
//! still the current one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use pgtier_engine::{Catalog, TableSchema};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SqlError};

/// The engine table whose annotation holds the document.
pub const AUTH_TABLE: &str = "\0pgtier_auth\0";
/// The annotation's first line (the number is the format).
const AUTH_MAGIC: &str = "pgtier_auth 1\n";
/// OIDs of roles made here: above every range catalog/mod.rs hands out.
const ROLE_OID_BASE: i64 = 16_384 + 7_000_000;
/// The predefined role whose members may run the cache-group statements.
pub const CACHE_ADMIN_ROLE: &str = "pg_cache_admin";
/// Its OID (beside PostgreSQL's predefined roles, 6171 pg_database_owner).
pub const CACHE_ADMIN_OID: i64 = 6_190;
/// PostgreSQL 15's owner of schema public.
pub const DATABASE_OWNER_ROLE_NAME: &str = "pg_database_owner";

/// Privilege bits in PostgreSQL's `ACL_*` order, so an `aclitem` prints
/// its letters in the order `aclitemout` does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Privs(pub u16);

impl Privs {
    pub const INSERT: Privs = Privs(1 << 0);
    pub const SELECT: Privs = Privs(1 << 1);
    pub const UPDATE: Privs = Privs(1 << 2);
    pub const DELETE: Privs = Privs(1 << 3);
    pub const TRUNCATE: Privs = Privs(1 << 4);
    pub const REFERENCES: Privs = Privs(1 << 5);
    pub const TRIGGER: Privs = Privs(1 << 6);
    pub const EXECUTE: Privs = Privs(1 << 7);
    pub const USAGE: Privs = Privs(1 << 8);
    pub const CREATE: Privs = Privs(1 << 9);
    pub const TEMPORARY: Privs = Privs(1 << 10);
    pub const CONNECT: Privs = Privs(1 << 11);
    pub const NONE: Privs = Privs(0);
    /// `ACL_ALL_RIGHTS_RELATION`.
    pub const ALL_TABLE: Privs = Privs(0b111_1111);
    /// `ACL_ALL_RIGHTS_SEQUENCE`: USAGE, SELECT, UPDATE.
    pub const ALL_SEQUENCE: Privs = Privs((1 << 8) | (1 << 1) | (1 << 2));
    /// `ACL_ALL_RIGHTS_SCHEMA`: USAGE, CREATE.
    pub const ALL_SCHEMA: Privs = Privs((1 << 8) | (1 << 9));
    /// `ACL_ALL_RIGHTS_DATABASE`: CREATE, TEMPORARY, CONNECT.
    pub const ALL_DATABASE: Privs = Privs((1 << 9) | (1 << 10) | (1 << 11));

    /// The letters of `aclitemout`, in bit order.
    const LETTERS: &'static [u8; 12] = b"arwdDxtXUCTc";

    #[inline]
    pub fn contains(self, other: Privs) -> bool {
        self.0 & other.0 == other.0
    }
    #[inline]
    pub fn intersects(self, other: Privs) -> bool {
        self.0 & other.0 != 0
    }
    #[inline]
    pub fn union(self, other: Privs) -> Privs {
        Privs(self.0 | other.0)
    }
    #[inline]
    pub fn minus(self, other: Privs) -> Privs {
        Privs(self.0 & !other.0)
    }
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// A privilege's keyword (`has_table_privilege`'s and GRANT's).
    pub fn from_keyword(word: &str) -> Option<Privs> {
        Some(match word.trim().to_ascii_uppercase().as_str() {
            "INSERT" => Privs::INSERT,
            "SELECT" => Privs::SELECT,
            "UPDATE" => Privs::UPDATE,
            "DELETE" => Privs::DELETE,
            "TRUNCATE" => Privs::TRUNCATE,
            "REFERENCES" => Privs::REFERENCES,
            "TRIGGER" => Privs::TRIGGER,
            "EXECUTE" => Privs::EXECUTE,
            "USAGE" => Privs::USAGE,
            "CREATE" => Privs::CREATE,
            "TEMPORARY" | "TEMP" => Privs::TEMPORARY,
            "CONNECT" => Privs::CONNECT,
            _ => return None,
        })
    }

    /// The keyword of a single privilege (error messages).
    pub fn keyword(self) -> &'static str {
        match self {
            Privs::INSERT => "INSERT",
            Privs::SELECT => "SELECT",
            Privs::UPDATE => "UPDATE",
            Privs::DELETE => "DELETE",
            Privs::TRUNCATE => "TRUNCATE",
            Privs::REFERENCES => "REFERENCES",
            Privs::TRIGGER => "TRIGGER",
            Privs::EXECUTE => "EXECUTE",
            Privs::USAGE => "USAGE",
            Privs::CREATE => "CREATE",
            Privs::TEMPORARY => "TEMPORARY",
            Privs::CONNECT => "CONNECT",
            _ => "?",
        }
    }
}

/// What kind of object an ACL is on (error messages, default privileges).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Table,
    View,
    Sequence,
    Schema,
    Database,
}

impl ObjectKind {
    pub fn word(self) -> &'static str {
        match self {
            ObjectKind::Table => "table",
            ObjectKind::View => "view",
            ObjectKind::Sequence => "sequence",
            ObjectKind::Schema => "schema",
            ObjectKind::Database => "database",
        }
    }

    /// Every privilege the kind has (`ALL`).
    pub fn all(self) -> Privs {
        match self {
            ObjectKind::Table | ObjectKind::View => Privs::ALL_TABLE,
            ObjectKind::Sequence => Privs::ALL_SEQUENCE,
            ObjectKind::Schema => Privs::ALL_SCHEMA,
            ObjectKind::Database => Privs::ALL_DATABASE,
        }
    }

    pub fn of(t: &TableSchema) -> ObjectKind {
        if t.sequence.is_some() {
            ObjectKind::Sequence
        } else if super::is_view(t) {
            ObjectKind::View
        } else {
            ObjectKind::Table
        }
    }
}

/// 42501 `permission denied for table t`.
pub fn permission_denied(kind: ObjectKind, name: &str) -> SqlError {
    SqlError::new("42501", format!("permission denied for {} {name}", kind.word()))
}

/// 42501 `must be owner of table t`.
pub fn must_be_owner(kind: ObjectKind, name: &str) -> SqlError {
    SqlError::new("42501", format!("must be owner of {} {name}", kind.word()))
}

/// A membership of a role in another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub role: String,
    #[serde(default)]
    pub admin: bool,
    pub grantor: String,
}

/// A role: `pg_authid`'s row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub oid: i64,
    #[serde(default)]
    pub superuser: bool,
    #[serde(default = "yes")]
    pub inherit: bool,
    #[serde(default)]
    pub createrole: bool,
    #[serde(default)]
    pub createdb: bool,
    #[serde(default)]
    pub login: bool,
    #[serde(default)]
    pub replication: bool,
    #[serde(default)]
    pub bypassrls: bool,
    #[serde(default = "no_limit")]
    pub connection_limit: i32,
    /// A SCRAM-SHA-256 verifier (`pg_authid.rolpassword`); never plaintext.
    #[serde(default)]
    pub password: Option<String>,
    /// VALID UNTIL, microseconds since 2000-01-01 UTC (timestamptz's).
    #[serde(default)]
    pub valid_until: Option<i64>,
    /// A user of the server's configuration file: always a superuser,
    /// cannot be dropped or demoted while the file names it.
    #[serde(default)]
    pub bootstrap: bool,
    #[serde(default)]
    pub member_of: Vec<Membership>,
}

fn yes() -> bool {
    true
}
fn no_limit() -> i32 {
    -1
}

impl Role {
    pub fn new(oid: i64) -> Role {
        Role {
            oid,
            superuser: false,
            inherit: true,
            createrole: false,
            createdb: false,
            login: false,
            replication: false,
            bypassrls: false,
            connection_limit: -1,
            password: None,
            valid_until: None,
            bootstrap: false,
            member_of: Vec::new(),
        }
    }

    pub fn is_superuser(&self) -> bool {
        self.superuser || self.bootstrap
    }
}

/// One `aclitem`: what `grantee` ("" for PUBLIC) holds, granted by `grantor`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclItem {
    pub grantee: String,
    pub grantor: String,
    pub privs: Privs,
    /// The privileges `grantee` may grant on (WITH GRANT OPTION).
    #[serde(default)]
    pub grantable: Privs,
}

/// An object's owner and ACL. `items` None is PostgreSQL's NULL acl: the
/// kind's default (the owner holds everything; for schema public, PUBLIC
/// also has USAGE).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectAcl {
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub items: Option<Vec<AclItem>>,
}

/// Everything: roles, and the owners and ACLs that differ from the defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthDoc {
    pub roles: BTreeMap<String, Role>,
    /// By stored relation name (the engine table's name).
    #[serde(default)]
    pub relations: BTreeMap<String, ObjectAcl>,
    /// By schema name (public included, once it differs from PostgreSQL 15's default).
    #[serde(default)]
    pub schemas: BTreeMap<String, ObjectAcl>,
    /// The database's ACL (CREATE for CREATE SCHEMA, TEMPORARY, CONNECT).
    #[serde(default)]
    pub database: ObjectAcl,
    /// The next role OID, less `ROLE_OID_BASE`.
    #[serde(default)]
    pub next_oid: i64,
}

impl AuthDoc {
    /// The document the catalog holds; None when there is none.
    pub fn read(catalog: &Catalog) -> Result<Option<(Arc<TableSchema>, AuthDoc)>> {
        let Some(t) = catalog.table_by_name(AUTH_TABLE) else { return Ok(None) };
        let text = t.annotation.as_deref().and_then(|a| a.strip_prefix(AUTH_MAGIC)).ok_or_else(|| {
            SqlError::new("XX000", "the stored roles and privileges are not in a format this pgtier reads")
        })?;
        let doc: AuthDoc = serde_json::from_str(text)
            .map_err(|e| SqlError::new("XX000", format!("the stored roles and privileges cannot be read: {e}")))?;
        Ok(Some((Arc::clone(t), doc)))
    }

    /// The annotation that stores `self`.
    pub fn encode(&self) -> String {
        // Serializing plain maps, strings and numbers cannot fail.
        let json = serde_json::to_string(self).unwrap_or_default();
        format!("{AUTH_MAGIC}{json}")
    }

    pub fn new_oid(&mut self) -> i64 {
        let oid = ROLE_OID_BASE + self.next_oid;
        self.next_oid += 1;
        oid
    }

    /// The role with OID 10, the owner of what has no recorded owner: the
    /// first bootstrap role; None when the server registered none.
    pub fn default_owner(&self) -> Option<&str> {
        self.roles.iter().filter(|(_, r)| r.bootstrap).min_by_key(|(_, r)| r.oid).map(|(n, _)| n.as_str())
    }

    /// Whether `name` names a role (the predefined ones included).
    pub fn role_exists(&self, name: &str) -> bool {
        self.roles.contains_key(name) || is_predefined(name)
    }

    /// `role` and every role it is a member of, directly or not; with
    /// `inheriting`, only through roles that inherit (whose privileges
    /// `role` uses without SET ROLE). Bounded by the number of roles.
    pub fn closure(&self, role: &str, inheriting: bool) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![role.to_owned()];
        while let Some(r) = todo.pop() {
            if !seen.insert(r.clone()) {
                continue;
            }
            let Some(def) = self.roles.get(&r) else { continue };
            // PostgreSQL 15: a role without INHERIT uses only its own
            // privileges, not those of the roles it is a member of.
            if inheriting && !def.inherit {
                continue;
            }
            for m in &def.member_of {
                todo.push(m.role.clone());
            }
        }
        seen
    }

    /// Whether `member` is `role` or a member of it (pg_has_role's MEMBER).
    pub fn is_member(&self, member: &str, role: &str) -> bool {
        member == role || self.closure(member, false).contains(role)
    }

    pub fn is_superuser(&self, role: &str) -> bool {
        self.roles.get(role).is_some_and(Role::is_superuser)
    }

    /// The owner of relation `key` (its recorded one, else the default).
    pub fn relation_owner<'a>(&'a self, key: &str, fallback: &'a str) -> &'a str {
        self.relations.get(key).and_then(|a| a.owner.as_deref()).or_else(|| self.default_owner()).unwrap_or(fallback)
    }

    /// The owner of schema `name`: public's is pg_database_owner.
    pub fn schema_owner<'a>(&'a self, name: &str, fallback: &'a str) -> &'a str {
        if let Some(o) = self.schemas.get(name).and_then(|a| a.owner.as_deref()) {
            return o;
        }
        if name == "public" {
            return DATABASE_OWNER_ROLE_NAME;
        }
        self.default_owner().unwrap_or(fallback)
    }

    /// The ACL items of an object as PostgreSQL would show them: its own,
    /// or the default for its kind and owner.
    pub fn effective_items(acl: Option<&ObjectAcl>, kind: ObjectKind, owner: &str) -> Vec<AclItem> {
        if let Some(items) = acl.and_then(|a| a.items.as_ref()) {
            return items.clone();
        }
        let mut items = vec![AclItem {
            grantee: owner.to_owned(),
            grantor: owner.to_owned(),
            privs: kind.all(),
            grantable: Privs::NONE,
        }];
        match kind {
            ObjectKind::Schema if owner == DATABASE_OWNER_ROLE_NAME => {
                items.push(AclItem {
                    grantee: String::new(),
                    grantor: owner.to_owned(),
                    privs: Privs::USAGE,
                    grantable: Privs::NONE,
                });
            }
            // PostgreSQL gives PUBLIC TEMPORARY and CONNECT on a database.
            ObjectKind::Database => items.push(AclItem {
                grantee: String::new(),
                grantor: owner.to_owned(),
                privs: Privs(Privs::TEMPORARY.0 | Privs::CONNECT.0),
                grantable: Privs::NONE,
            }),
            _ => {}
        }
        items
    }

    /// What `role` holds on an object through its ACL: its own items,
    /// PUBLIC's, and those of the roles it inherits from; plus
    /// everything when it owns the object's owner role through membership
    /// and the ACL is the default (an owner's rights are its ACL items).
    pub fn held(&self, role: &str, items: &[AclItem]) -> Privs {
        let roles = self.closure(role, true);
        items
            .iter()
            .filter(|i| i.grantee.is_empty() || roles.contains(&i.grantee))
            .fold(Privs::NONE, |acc, i| acc.union(i.privs))
    }

    /// What `role` may grant on an object (WITH GRANT OPTION items).
    pub fn grantable(&self, role: &str, items: &[AclItem]) -> Privs {
        let roles = self.closure(role, true);
        items
            .iter()
            .filter(|i| i.grantee.is_empty() || roles.contains(&i.grantee))
            .fold(Privs::NONE, |acc, i| acc.union(i.grantable))
    }

    /// Relation `from` is now called `to`.
    pub fn rename_relation(&mut self, from: &str, to: &str) -> bool {
        match self.relations.remove(from) {
            Some(a) => {
                self.relations.insert(to.to_owned(), a);
                true
            }
            None => false,
        }
    }

    /// Objects that name `role` (owner or grantee), as DROP ROLE's 2BP01
    /// detail lists them: `owner of table t`, `privileges for table t`.
    pub fn dependents(&self, role: &str, kind_of: impl Fn(&str) -> (ObjectKind, String)) -> Vec<String> {
        let mut out = Vec::new();
        for (key, acl) in &self.relations {
            let (kind, name) = kind_of(key);
            if acl.owner.as_deref() == Some(role) {
                out.push(format!("owner of {} {name}", kind.word()));
            }
            if acl
                .items
                .iter()
                .flatten()
                .any(|i| i.grantee == role || (i.grantor == role && acl.owner.as_deref() != Some(role)))
            {
                out.push(format!("privileges for {} {name}", kind.word()));
            }
        }
        for (name, acl) in &self.schemas {
            if acl.owner.as_deref() == Some(role) {
                out.push(format!("owner of schema {name}"));
            }
            if acl.items.iter().flatten().any(|i| i.grantee == role) {
                out.push(format!("privileges for schema {name}"));
            }
        }
        if self.database.items.iter().flatten().any(|i| i.grantee == role) {
            out.push("privileges for database".to_owned());
        }
        out
    }
}

/// The owner of schema `name`: a schema CREATE SCHEMA made keeps its
/// owner with it (schemas.rs); public's is pg_database_owner.
pub fn schema_owner_of(catalog: &Catalog, doc: &AuthDoc, name: &str, fallback: &str) -> String {
    match super::user_schema_named(catalog, name) {
        Some(s) if !s.owner.is_empty() => s.owner,
        _ => doc.schema_owner(name, fallback).to_owned(),
    }
}

/// Writes `doc` in transaction `txn` (the engine table is made the first time).
pub fn store(txn: &mut pgtier_engine::Transaction, doc: &AuthDoc) -> Result<()> {
    let text = doc.encode();
    match txn.catalog().table_by_name(AUTH_TABLE).map(|t| t.id) {
        Some(id) => txn.set_annotation(id, Some(text))?,
        None => {
            // The engine wants a column; this one never holds a value.
            let mut def = pgtier_engine::TableDef::new(
                AUTH_TABLE,
                vec![pgtier_engine::ColumnDef::new("doc", pgtier_engine::DataType::Text)],
                &[],
            );
            def.annotation = Some(text);
            txn.create_table(&def)?;
        }
    }
    Ok(())
}

/// The server's configured users become roles: superusers that may log
/// in, marked `bootstrap` (the file stays their source of truth for the
/// password); a role the file no longer names keeps its attributes but is
/// no longer one of them. One transaction, written only when something
/// changed.
pub fn register_bootstrap_users(db: &pgtier_engine::Database, names: &[String]) -> Result<()> {
    let mut txn = db.begin()?;
    let mut doc = AuthDoc::read(txn.catalog())?.map(|(_, d)| d).unwrap_or_default();
    let before = doc.clone();
    for name in names {
        if !doc.roles.contains_key(name) {
            let mut r = Role::new(doc.new_oid());
            r.createrole = true;
            r.createdb = true;
            r.replication = true;
            r.bypassrls = true;
            doc.roles.insert(name.clone(), r);
        }
        if let Some(r) = doc.roles.get_mut(name) {
            r.bootstrap = true;
            r.superuser = true;
            r.login = true;
        }
    }
    for (name, r) in &mut doc.roles {
        if r.bootstrap && !names.contains(name) {
            r.bootstrap = false;
        }
    }
    if doc == before {
        txn.rollback();
        return Ok(());
    }
    store(&mut txn, &doc)?;
    txn.commit()?;
    Ok(())
}

/// What the server needs to let a role in that the configuration file
/// does not name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginRole {
    /// None also when VALID UNTIL has passed: no password matches then.
    pub verifier: Option<String>,
    pub can_login: bool,
    /// -1: no limit (a superuser has none either).
    pub connection_limit: i32,
}

/// Role `name` as a login sees it; None when no role has that name.
pub fn login_role(catalog: &Catalog, name: &str) -> Option<LoginRole> {
    let (_, doc) = AuthDoc::read(catalog).ok().flatten()?;
    let r = doc.roles.get(name)?;
    let expired = r.valid_until.is_some_and(|until| until < crate::clock::now_micros());
    Some(LoginRole {
        verifier: r.password.clone().filter(|_| !expired),
        can_login: r.login,
        connection_limit: if r.is_superuser() { -1 } else { r.connection_limit },
    })
}

/// Roles PostgreSQL (or pgtier) defines without CREATE ROLE.
pub fn is_predefined(name: &str) -> bool {
    name == CACHE_ADMIN_ROLE || name == DATABASE_OWNER_ROLE_NAME
}

/// `aclitem[]` as text: `{alice=arw/owner,=r/owner}`.
pub fn acl_text(items: &[AclItem]) -> String {
    let mut out = String::from("{");
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        let mut one = String::new();
        push_role_name(&mut one, &item.grantee);
        one.push('=');
        for (bit, letter) in Privs::LETTERS.iter().enumerate() {
            let p = Privs(1 << bit);
            if item.privs.contains(p) {
                one.push(char::from(*letter));
                if item.grantable.contains(p) {
                    one.push('*');
                }
            }
        }
        one.push('/');
        push_role_name(&mut one, &item.grantor);
        // An array element with '=' and '/' only needs quotes for what
        // array_out quotes: spaces, commas, braces, quotes, backslashes.
        if one.contains([' ', ',', '{', '}', '"', '\\']) {
            out.push('"');
            for c in one.chars() {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
        } else {
            out.push_str(&one);
        }
    }
    out.push('}');
    out
}

/// A role name as `putid` writes it in an aclitem: double-quoted unless
/// it is all alphanumerics and underscores.
fn push_role_name(out: &mut String, name: &str) {
    if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        out.push_str(name);
    } else {
        out.push('"');
        for c in name.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    }
}

pub use crate::settings::SessionAuth;

/// The catalog's document for a session, parsed once per change of it:
/// the session keeps the parsed document with the engine table it came
/// from, and a pointer comparison tells whether it is still current.
pub fn session_doc(auth: &mut SessionAuth, catalog: &Catalog) -> Result<Option<Arc<AuthDoc>>> {
    let Some(t) = catalog.table_by_name(AUTH_TABLE) else {
        auth.doc_cache = None;
        return Ok(None);
    };
    if let Some((cached_t, doc)) = &auth.doc_cache
        && Arc::ptr_eq(cached_t, t)
        && let Ok(doc) = Arc::clone(doc).downcast::<AuthDoc>()
    {
        return Ok(Some(doc));
    }
    let Some((t, doc)) = AuthDoc::read(catalog)? else { return Ok(None) };
    let doc = Arc::new(doc);
    auth.doc_cache = Some((t, Arc::clone(&doc) as Arc<dyn std::any::Any + Send + Sync>));
    Ok(Some(doc))
}

/// A privilege a statement needs on a relation (or schema, or the
/// database), checked each time it runs (privileges may change between
/// PREPARE and EXECUTE; PostgreSQL checks at executor start too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelationPerm {
    /// The stored relation name; a schema's name; "" for the database.
    pub relation: String,
    pub kind: ObjectKind,
    pub needed: Privs,
    /// The statement changes the object's definition: only its owner (or
    /// a member of the owner role) may.
    pub owner: bool,
    /// Checked as the owner of this view (a view's relations are read
    /// with its owner's rights); None: as the current role.
    pub via_view: Option<String>,
}

/// The role privileges are checked as: SET ROLE's, else the session's.
pub fn current_role(settings: &std::collections::HashMap<String, String>) -> &str {
    match settings.get("role").map(String::as_str) {
        Some(r) if !r.is_empty() && r != "none" => r,
        _ => settings.get("session_authorization").map_or("", String::as_str),
    }
}

/// Whether `role` is a superuser for this session: always when the
/// session is trusted and has not SET ROLE to another, or there is no
/// document; else as the document says.
pub fn superuser(auth: &SessionAuth, doc: Option<&AuthDoc>, role: &str) -> bool {
    match doc {
        None => true,
        Some(d) => (auth.trusted && !d.roles.contains_key(role)) || d.is_superuser(role),
    }
}

/// Checks `perms` for the session's current role: 42501 naming the first
/// object it lacks a privilege on (or does not own).
pub fn check_relations(
    perms: &[RelationPerm],
    catalog: &Catalog,
    settings: &mut crate::settings::Settings,
) -> Result<()> {
    if perms.is_empty() {
        return Ok(());
    }
    // The fast path, taken by nearly every statement: the same catalog
    // stamp (so the same roles document) under which this role needed no
    // check, no roles stored or a superuser (one integer comparison; a
    // name lookup here cost TATP ~3 % of its instructions).
    let stamp = catalog.names_stamp();
    if settings.auth().unchecked_at == Some(stamp) {
        return Ok(());
    }
    let Some(doc) = session_doc(settings.auth_mut(), catalog)? else {
        settings.auth_mut().unchecked_at = Some(stamp);
        return Ok(());
    };
    let role = current_role(settings).to_owned();
    if superuser(settings.auth(), Some(&doc), &role) {
        settings.auth_mut().unchecked_at = Some(stamp);
        return Ok(());
    }
    let auth = settings.auth();
    let database = settings.get("pgtier.database").cloned().unwrap_or_default();
    let fallback = auth.authenticated.clone();
    for p in perms {
        let checker = match &p.via_view {
            Some(view) => doc.relation_owner(view, &fallback).to_owned(),
            None => role.clone(),
        };
        if p.via_view.is_some() && superuser(auth, Some(&doc), &checker) {
            continue;
        }
        let (owner, acl, shown) = match p.kind {
            ObjectKind::Schema => (
                schema_owner_of(catalog, &doc, &p.relation, &fallback),
                doc.schemas.get(&p.relation),
                p.relation.as_str(),
            ),
            ObjectKind::Database => {
                (doc.default_owner().unwrap_or(&fallback).to_owned(), Some(&doc.database), database.as_str())
            }
            _ => (
                doc.relation_owner(&p.relation, &fallback).to_owned(),
                doc.relations.get(&p.relation),
                crate::names::short(&p.relation),
            ),
        };
        if p.owner {
            if !doc.is_member(&checker, &owner) {
                return Err(must_be_owner(p.kind, shown));
            }
            continue;
        }
        let items = AuthDoc::effective_items(acl, p.kind, &owner);
        if !doc.held(&checker, &items).contains(p.needed) {
            return Err(permission_denied(p.kind, shown));
        }
    }
    Ok(())
}

/// Whether the session's current role is a superuser (no document: yes).
pub fn session_is_superuser(catalog: &Catalog, settings: &mut crate::settings::Settings) -> Result<bool> {
    let doc = session_doc(settings.auth_mut(), catalog)?;
    let role = current_role(settings).to_owned();
    Ok(superuser(settings.auth(), doc.as_deref(), &role))
}

/// A sequence function's check: nextval needs USAGE or UPDATE, currval
/// and lastval USAGE or SELECT, setval UPDATE (`any_of`).
pub fn check_sequence(
    catalog: &Catalog,
    settings: &mut crate::settings::Settings,
    sequence: &str,
    any_of: Privs,
) -> Result<()> {
    let Some(doc) = session_doc(settings.auth_mut(), catalog)? else { return Ok(()) };
    let role = current_role(settings).to_owned();
    if superuser(settings.auth(), Some(&doc), &role) {
        return Ok(());
    }
    let owner = doc.relation_owner(sequence, &settings.auth().authenticated);
    let items = AuthDoc::effective_items(doc.relations.get(sequence), ObjectKind::Sequence, owner);
    if doc.held(&role, &items).intersects(any_of) {
        return Ok(());
    }
    Err(permission_denied(ObjectKind::Sequence, crate::names::short(sequence)))
}

/// The roles the catalogs show (pg_roles, pg_authid, pg_user), by name.
pub struct ShownRoles {
    pub doc: Option<AuthDoc>,
    /// (name, OID, attributes); the default owner is OID 10.
    pub roles: Vec<(String, i64, Role)>,
}

impl ShownRoles {
    /// Every role of the catalog's document, the predefined ones, and the
    /// session's own user when no document names it (the only role before
    /// roles were stored: OID 10, a superuser).
    pub fn of(catalog: &Catalog, session_user: &str) -> ShownRoles {
        let doc = AuthDoc::read(catalog).ok().flatten().map(|(_, d)| d);
        let mut roles = Vec::new();
        let default_owner = doc.as_ref().and_then(|d| d.default_owner().map(str::to_owned));
        if let Some(d) = &doc {
            for (name, r) in &d.roles {
                let oid = if default_owner.as_deref() == Some(name.as_str()) { super::OWNER_OID } else { r.oid };
                roles.push((name.clone(), oid, r.clone()));
            }
        }
        let known = doc.as_ref().is_some_and(|d| d.roles.contains_key(session_user));
        if !known && default_owner.is_none() && !session_user.is_empty() {
            let mut me = Role::new(super::OWNER_OID);
            me.superuser = true;
            me.login = true;
            me.createrole = true;
            me.createdb = true;
            me.replication = true;
            me.bypassrls = true;
            roles.push((session_user.to_owned(), super::OWNER_OID, me));
        }
        roles.push((
            DATABASE_OWNER_ROLE_NAME.to_owned(),
            super::DATABASE_OWNER_ROLE,
            Role::new(super::DATABASE_OWNER_ROLE),
        ));
        roles.push((CACHE_ADMIN_ROLE.to_owned(), CACHE_ADMIN_OID, Role::new(CACHE_ADMIN_OID)));
        roles.sort_by_key(|(_, oid, _)| *oid);
        ShownRoles { doc, roles }
    }

    /// A role's OID (0 for a name no role has).
    pub fn oid(&self, name: &str) -> i64 {
        self.roles.iter().find(|(n, _, _)| n == name).map_or(0, |(_, oid, _)| *oid)
    }

    /// The name of the role with `oid`.
    pub fn name(&self, oid: i64) -> Option<&str> {
        self.roles.iter().find(|(_, o, _)| *o == oid).map(|(n, _, _)| n.as_str())
    }

    /// The OID of relation `key`'s owner.
    pub fn relation_owner_oid(&self, key: &str) -> i64 {
        match &self.doc {
            Some(d) => match d.relations.get(key).and_then(|a| a.owner.as_deref()) {
                Some(o) => self.oid(o),
                None => super::OWNER_OID,
            },
            None => super::OWNER_OID,
        }
    }

    /// Relation `key`'s `relacl` text; None for the default (NULL).
    pub fn relation_acl(&self, key: &str) -> Option<String> {
        let acl = self.doc.as_ref()?.relations.get(key)?;
        acl.items.as_ref().map(|items| acl_text(items))
    }

    /// Schema `name`'s `nspacl` text; None for the default (NULL).
    pub fn schema_acl(&self, name: &str) -> Option<String> {
        let acl = self.doc.as_ref()?.schemas.get(name)?;
        acl.items.as_ref().map(|items| acl_text(items))
    }

    /// pg_auth_members: (role OID, member OID, grantor OID, admin option).
    pub fn memberships(&self) -> Vec<(i64, i64, i64, bool)> {
        let mut out = Vec::new();
        for (_, oid, r) in &self.roles {
            for m in &r.member_of {
                out.push((self.oid(&m.role), *oid, self.oid(&m.grantor), m.admin));
            }
        }
        out
    }
}

/// Which `has_*_privilege` function (or `pg_has_role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrivilegeFn {
    Table,
    AnyColumn,
    Column,
    Schema,
    Database,
    Role,
}

/// One privilege word of an inquiry function's list, with `WITH GRANT
/// OPTION` (or `WITH ADMIN OPTION` for roles) split off.
fn inquiry_words(list: &str) -> Vec<(String, bool)> {
    list.split(',')
        .map(|w| {
            let w = w.trim().to_ascii_uppercase();
            for suffix in [" WITH GRANT OPTION", " WITH ADMIN OPTION"] {
                if let Some(base) = w.strip_suffix(suffix) {
                    return (base.trim().to_owned(), true);
                }
            }
            (w, false)
        })
        .collect()
}

/// `has_table_privilege` and the rest: whether the role (the current one
/// when the call names none) holds ANY of the listed privileges, as
/// PostgreSQL answers (a superuser holds everything; the catalogs are
/// readable by PUBLIC).
pub fn has_privilege(
    f: PrivilegeFn,
    args: &[pgtier_engine::Value],
    catalog: &Catalog,
    settings: &crate::settings::Settings,
) -> Result<pgtier_engine::Value> {
    use pgtier_engine::Value;
    if args.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let text = |v: &Value| v.as_str().map(str::to_owned).unwrap_or_else(|| crate::value::to_text(v));
    let object_args = match f {
        PrivilegeFn::Column => 3,
        _ => 2,
    };
    let (role, rest) =
        if args.len() > object_args { (text(&args[0]), &args[1..]) } else { (current_role(settings).to_owned(), args) };
    let shown = ShownRoles::of(catalog, settings.get("session_authorization").map_or("", String::as_str));
    let doc = shown.doc.as_ref();
    // A role given by OID (its text is digits).
    let role = match role.parse::<i64>() {
        Ok(oid) => shown
            .name(oid)
            .map(str::to_owned)
            .ok_or_else(|| SqlError::new("42704", format!("role with OID {oid} does not exist")))?,
        Err(_) => role,
    };
    if shown.oid(&role) == 0 {
        return Err(SqlError::new("42704", format!("role \"{role}\" does not exist")));
    }
    let su = match doc {
        None => true,
        Some(d) => d.is_superuser(&role) || (settings.auth().trusted && !d.roles.contains_key(&role)),
    };
    let words = inquiry_words(&text(&rest[rest.len() - 1]));
    let empty = AuthDoc::default();
    let d = doc.unwrap_or(&empty);
    if f == PrivilegeFn::Role {
        let target = text(&rest[0]);
        if shown.oid(&target) == 0 {
            return Err(SqlError::new("42704", format!("role \"{target}\" does not exist")));
        }
        let mut any = false;
        for (w, admin) in &words {
            let held = match w.as_str() {
                "MEMBER" => su || d.is_member(&role, &target),
                "USAGE" => su || role == target || d.closure(&role, true).contains(&target),
                "SET" => su || d.is_member(&role, &target),
                other => {
                    return Err(SqlError::new(
                        "22023",
                        format!("unrecognized privilege type: \"{}\"", other.to_lowercase()),
                    ));
                }
            };
            let admin_ok = !admin
                || su
                || d.roles.get(&role).is_some_and(|r| r.member_of.iter().any(|m| m.role == target && m.admin));
            any |= held && admin_ok;
        }
        return Ok(Value::Bool(any));
    }
    let object = text(&rest[0]);
    let (kind, owner, acl, allowed) = match f {
        PrivilegeFn::Schema => {
            let exists = matches!(object.as_str(), "public" | "pg_catalog" | "information_schema" | "pg_toast")
                || super::user_schema_named(catalog, &object).is_some();
            if !exists {
                return Err(SqlError::new("3F000", format!("schema \"{object}\" does not exist")));
            }
            if matches!(object.as_str(), "pg_catalog" | "information_schema") {
                // USAGE for PUBLIC, as PostgreSQL grants.
                return Ok(Value::Bool(su || words.iter().any(|(w, g)| w == "USAGE" && !g)));
            }
            let owner = schema_owner_of(catalog, d, &object, &settings.auth().authenticated);
            (ObjectKind::Schema, owner, d.schemas.get(&object).cloned(), Privs::ALL_SCHEMA)
        }
        PrivilegeFn::Database => {
            let owner = d.default_owner().unwrap_or(&settings.auth().authenticated).to_owned();
            (ObjectKind::Database, owner, Some(d.database.clone()), Privs::ALL_DATABASE)
        }
        _ => {
            let oid = super::reg_lookup(catalog, settings, crate::value::types::RegKind::Class, &object)?;
            let Some(t) = catalog.tables().find(|t| super::table_oid(t) == oid) else {
                // A system catalog: PUBLIC may read it.
                return Ok(Value::Bool(su || words.iter().any(|(w, g)| w == "SELECT" && !g)));
            };
            if f == PrivilegeFn::Column {
                let col = text(&rest[1]);
                if t.column_index(&col).is_none() {
                    return Err(SqlError::new(
                        "42703",
                        format!("column \"{col}\" of relation \"{}\" does not exist", crate::names::short(&t.name)),
                    ));
                }
            }
            let kind = ObjectKind::of(t);
            let owner = d.relation_owner(&t.name, &settings.auth().authenticated).to_owned();
            let all = if kind == ObjectKind::Sequence { Privs::ALL_SEQUENCE } else { Privs::ALL_TABLE };
            (kind, owner, d.relations.get(&t.name).cloned(), all)
        }
    };
    let items = AuthDoc::effective_items(acl.as_ref(), kind, &owner);
    let held = d.held(&role, &items);
    let grantable = d.grantable(&role, &items);
    let mut any = false;
    for (w, with_grant) in &words {
        let p = Privs::from_keyword(w)
            .filter(|p| allowed.contains(*p) || (f == PrivilegeFn::Column && *p == Privs::SELECT))
            .ok_or_else(|| SqlError::new("22023", format!("unrecognized privilege type: \"{}\"", w.to_lowercase())))?;
        let ok = su || if *with_grant { grantable.contains(p) } else { held.contains(p) };
        any |= ok;
    }
    Ok(Value::Bool(any))
}
