//! Roles, privileges and ownership, run: each statement reads the stored
//! document (catalog/roles.rs), checks who may do it as PostgreSQL 15's
//! user.c and aclchk.c do, and writes the document back in the statement's
//! transaction (a ROLLBACK undoes it). SET ROLE and SET SESSION
//! AUTHORIZATION change the session's settings (so a ROLLBACK of the block
//! undoes them too).

use pgtier_engine::DataType;

use super::Exec;
use crate::catalog::roles::{
    AclItem, AuthDoc, CACHE_ADMIN_ROLE, DATABASE_OWNER_ROLE_NAME, Membership, ObjectAcl, ObjectKind, Privs, Role,
    current_role, is_predefined, permission_denied, superuser,
};
use crate::error::{Result, SqlError, SqlNotice};
use crate::plan::{Dcl, GrantTarget, RoleOptions};

/// How many roles the document may hold (bounded, as everything).
const ROLES_MAX: usize = 10_000;

/// 42704 `role "x" does not exist`.
fn no_such_role(name: &str) -> SqlError {
    SqlError::new("42704", format!("role \"{name}\" does not exist"))
}

/// 42939 for names PostgreSQL reserves.
fn check_new_role_name(name: &str) -> Result<()> {
    if name.starts_with("pg_") {
        return Err(SqlError::new("42939", format!("role name \"{name}\" is reserved"))
            .with_detail("Role names starting with \"pg_\" are reserved."));
    }
    if matches!(name, "public" | "none") || name == CACHE_ADMIN_ROLE {
        return Err(SqlError::new("42939", format!("role name \"{name}\" is reserved")));
    }
    Ok(())
}

/// A SCRAM verifier for `password` as PostgreSQL stores it: a verifier
/// given already is kept; plaintext is hashed (password_encryption =
/// scram-sha-256); an md5 hash is refused (pgtier authenticates with SCRAM).
fn verifier(password: &str) -> Result<String> {
    if password.starts_with("SCRAM-SHA-256$") {
        return Ok(password.to_owned());
    }
    if password.len() == 35 && password.starts_with("md5") {
        return Err(SqlError::unsupported("an MD5 password hash (pgtier stores SCRAM-SHA-256 verifiers)"));
    }
    Ok(postgres_protocol::password::scram_sha_256(password.as_bytes()))
}

impl Exec<'_> {
    /// The stored document, or an empty one when none is stored yet.
    fn auth_doc(&mut self) -> Result<AuthDoc> {
        Ok(AuthDoc::read(self.txn.catalog())?.map(|(_, d)| d).unwrap_or_default())
    }

    /// Writes `doc` in this transaction.
    fn store_auth_doc(&mut self, doc: &AuthDoc) -> Result<()> {
        crate::catalog::roles::store(self.txn, doc)
    }

    /// The current role, and whether it is a superuser, under `doc`.
    fn who(&self, doc: &AuthDoc) -> (String, bool) {
        let role = current_role(self.settings).to_owned();
        let su = superuser(self.settings.auth(), Some(doc), &role);
        (role, su)
    }

    /// A role name as written: CURRENT_USER and the like resolved.
    fn resolve_role(&self, written: &str) -> String {
        match written.strip_prefix('\0') {
            Some("session_user") => self.settings.get("session_authorization").cloned().unwrap_or_default(),
            Some(_) => current_role(self.settings).to_owned(),
            None => written.to_owned(),
        }
    }

    pub fn dcl(&mut self, d: &Dcl) -> Result<&'static str> {
        match d {
            Dcl::CreateRole { name, if_not_exists, options, in_roles, members, admins } => {
                self.create_role(name, *if_not_exists, options, in_roles, members, admins)?;
                Ok("CREATE ROLE")
            }
            Dcl::AlterRole { name, options } => {
                self.alter_role(name, options)?;
                Ok("ALTER ROLE")
            }
            Dcl::RenameRole { from, to } => {
                self.rename_role(from, to)?;
                Ok("ALTER ROLE")
            }
            Dcl::DropRoles { names, if_exists } => {
                self.drop_roles(names, *if_exists)?;
                Ok("DROP ROLE")
            }
            Dcl::Privileges { grant, privs, target, grantees, grant_option, cascade } => {
                self.privileges(*grant, *privs, target, grantees, *grant_option, *cascade)?;
                Ok(if *grant { "GRANT" } else { "REVOKE" })
            }
            Dcl::Membership { grant, roles, grantees, admin } => {
                self.membership(*grant, roles, grantees, *admin)?;
                Ok(if *grant { "GRANT ROLE" } else { "REVOKE ROLE" })
            }
            Dcl::SetRole { role, local, reset } => {
                self.set_role(role.as_deref(), *local)?;
                Ok(if *reset { "RESET" } else { "SET" })
            }
            Dcl::SetSessionAuthorization { role, local, reset } => {
                self.set_session_authorization(role.as_deref(), *local)?;
                Ok(if *reset { "RESET" } else { "SET" })
            }
            Dcl::AlterOwner { relation, kind, owner } => {
                self.alter_owner(relation, *kind, owner)?;
                Ok(match kind {
                    ObjectKind::View => "ALTER VIEW",
                    ObjectKind::Sequence => "ALTER SEQUENCE",
                    _ => "ALTER TABLE",
                })
            }
        }
    }

    fn create_role(
        &mut self,
        name: &str,
        if_not_exists: bool,
        options: &RoleOptions,
        in_roles: &[String],
        members: &[String],
        admins: &[String],
    ) -> Result<()> {
        let mut doc = self.auth_doc()?;
        let (me, su) = self.who(&doc);
        let may_create = su || doc.roles.get(&me).is_some_and(|r| r.createrole);
        if options.superuser == Some(true) && !su {
            return Err(SqlError::new("42501", "must be superuser to create superusers"));
        }
        if options.replication == Some(true) && !su {
            return Err(SqlError::new("42501", "must be superuser to create replication users"));
        }
        if options.bypassrls == Some(true) && !su {
            return Err(SqlError::new("42501", "must be superuser to create bypassrls users"));
        }
        if !may_create {
            return Err(SqlError::new("42501", "permission denied to create role"));
        }
        check_new_role_name(name)?;
        if doc.role_exists(name) || self.is_unregistered_session_user(&doc, name) {
            if if_not_exists {
                self.notices.push(SqlNotice {
                    sqlstate: "42710",
                    message: format!("role \"{name}\" already exists, skipping"),
                });
                return Ok(());
            }
            return Err(SqlError::new("42710", format!("role \"{name}\" already exists")));
        }
        if doc.roles.len() >= ROLES_MAX {
            return Err(SqlError::new("54000", format!("too many roles (at most {ROLES_MAX})")));
        }
        let mut role = Role::new(doc.new_oid());
        self.apply_options(&mut role, options)?;
        doc.roles.insert(name.to_owned(), role);
        for r in in_roles {
            self.add_member(&mut doc, r, name, false, &me, su)?;
        }
        for m in members {
            self.add_member(&mut doc, name, m, false, &me, su)?;
        }
        for m in admins {
            self.add_member(&mut doc, name, m, true, &me, su)?;
        }
        self.store_auth_doc(&doc)
    }

    /// The session's own user when no document names it (the embedded
    /// API's "postgres", or a server that registered nobody): a role
    /// PostgreSQL would have.
    fn is_unregistered_session_user(&self, doc: &AuthDoc, name: &str) -> bool {
        !doc.roles.contains_key(name)
            && self.settings.auth().trusted
            && self.settings.get("session_authorization").is_some_and(|u| u == name)
    }

    fn apply_options(&mut self, role: &mut Role, o: &RoleOptions) -> Result<()> {
        let set = |field: &mut bool, v: Option<bool>| {
            if let Some(v) = v {
                *field = v;
            }
        };
        set(&mut role.superuser, o.superuser);
        set(&mut role.createdb, o.createdb);
        set(&mut role.createrole, o.createrole);
        set(&mut role.inherit, o.inherit);
        set(&mut role.login, o.login);
        set(&mut role.replication, o.replication);
        set(&mut role.bypassrls, o.bypassrls);
        if let Some(n) = o.connection_limit {
            role.connection_limit = n;
        }
        match &o.password {
            None => {}
            Some(None) => role.password = None,
            Some(Some(p)) if p.is_empty() => {
                self.notices.push(SqlNotice {
                    sqlstate: "00000",
                    message: "empty string is not a valid password, clearing password".into(),
                });
                role.password = None;
            }
            Some(Some(p)) => role.password = Some(verifier(p)?),
        }
        if let Some(v) = &o.valid_until {
            role.valid_until = match v {
                None => None,
                Some(text) => match crate::value::parse_input(text, DataType::TimestampTz(None))? {
                    pgtier_engine::Value::TimestampTz(us) => Some(us),
                    _ => {
                        return Err(SqlError::new(
                            "22007",
                            format!("invalid input syntax for type timestamp with time zone: \"{text}\""),
                        ));
                    }
                },
            };
        }
        Ok(())
    }

    fn alter_role(&mut self, written: &str, o: &RoleOptions) -> Result<()> {
        let name = self.resolve_role(written);
        let mut doc = self.auth_doc()?;
        let (me, su) = self.who(&doc);
        let Some(target) = doc.roles.get(&name).cloned() else {
            return Err(no_such_role(&name));
        };
        if target.is_superuser() || o.superuser.is_some() {
            if !su {
                return Err(SqlError::new(
                    "42501",
                    "must be superuser to alter superuser roles or change superuser attribute",
                ));
            }
        } else if target.replication || o.replication.is_some() {
            if !su {
                return Err(SqlError::new(
                    "42501",
                    "must be superuser to alter replication roles or change replication attribute",
                ));
            }
        } else if o.bypassrls.is_some() {
            if !su {
                return Err(SqlError::new("42501", "must be superuser to change bypassrls attribute"));
            }
        } else if !su && !doc.roles.get(&me).is_some_and(|r| r.createrole) {
            let only_own_password = o.password.is_some()
                && name == me
                && *o == RoleOptions { password: o.password.clone(), ..RoleOptions::default() };
            if !only_own_password {
                return Err(SqlError::new("42501", "permission denied"));
            }
        }
        if target.bootstrap && o.superuser == Some(false) {
            return Err(SqlError::new(
                "42501",
                format!("role \"{name}\" is a user of pgtier's configuration file and stays a superuser"),
            ));
        }
        let mut role = target;
        self.apply_options(&mut role, o)?;
        doc.roles.insert(name, role);
        self.store_auth_doc(&doc)
    }

    fn rename_role(&mut self, from: &str, to: &str) -> Result<()> {
        let mut doc = self.auth_doc()?;
        let (me, su) = self.who(&doc);
        let Some(role) = doc.roles.get(from).cloned() else { return Err(no_such_role(from)) };
        if self.settings.get("session_authorization").is_some_and(|u| u == from) {
            return Err(SqlError::new("0A000", "session user cannot be renamed"));
        }
        if me == from {
            return Err(SqlError::new("0A000", "current user cannot be renamed"));
        }
        check_new_role_name(to)?;
        if doc.role_exists(to) {
            return Err(SqlError::new("42710", format!("role \"{to}\" already exists")));
        }
        if role.is_superuser() && !su {
            return Err(SqlError::new("42501", "must be superuser to rename superusers"));
        }
        if !su && !doc.roles.get(&me).is_some_and(|r| r.createrole) {
            return Err(SqlError::new("42501", "permission denied to rename role"));
        }
        if role.bootstrap {
            return Err(SqlError::new(
                "42501",
                format!("role \"{from}\" is a user of pgtier's configuration file and cannot be renamed"),
            ));
        }
        doc.roles.remove(from);
        doc.roles.insert(to.to_owned(), role);
        // Every mention follows the new name.
        let rename = |s: &mut String| {
            if s == from {
                *s = to.to_owned();
            }
        };
        for r in doc.roles.values_mut() {
            for m in &mut r.member_of {
                rename(&mut m.role);
                rename(&mut m.grantor);
            }
        }
        let acls = doc.relations.values_mut().chain(doc.schemas.values_mut()).chain(std::iter::once(&mut doc.database));
        for acl in acls {
            if let Some(o) = acl.owner.as_mut() {
                rename(o);
            }
            for i in acl.items.iter_mut().flatten() {
                rename(&mut i.grantee);
                rename(&mut i.grantor);
            }
        }
        self.store_auth_doc(&doc)
    }

    fn drop_roles(&mut self, names: &[String], if_exists: bool) -> Result<()> {
        let mut doc = self.auth_doc()?;
        let (me, su) = self.who(&doc);
        if !su && !doc.roles.get(&me).is_some_and(|r| r.createrole) {
            return Err(SqlError::new("42501", "permission denied to drop role"));
        }
        for name in names {
            let Some(role) = doc.roles.get(name).cloned() else {
                if is_predefined(name) || self.is_unregistered_session_user(&doc, name) {
                    return Err(SqlError::new("0A000", format!("cannot drop role \"{name}\": it is built in")));
                }
                if if_exists {
                    self.notices.push(SqlNotice {
                        sqlstate: "00000",
                        message: format!("role \"{name}\" does not exist, skipping"),
                    });
                    continue;
                }
                return Err(no_such_role(name));
            };
            if *name == me {
                return Err(SqlError::new("55006", "current user cannot be dropped"));
            }
            if self.settings.get("session_authorization").is_some_and(|u| u == name) {
                return Err(SqlError::new("55006", "session user cannot be dropped"));
            }
            if role.is_superuser() && !su {
                return Err(SqlError::new("42501", "must be superuser to drop superusers"));
            }
            if role.bootstrap {
                return Err(SqlError::new(
                    "2BP01",
                    format!("role \"{name}\" cannot be dropped because it is a user of pgtier's configuration file"),
                ));
            }
            let catalog = self.txn.catalog();
            let details = doc.dependents(name, |key| {
                let kind = catalog.table_by_name(key).map_or(ObjectKind::Table, |t| ObjectKind::of(t));
                (kind, crate::names::short(key).to_owned())
            });
            if !details.is_empty() {
                return Err(SqlError::new(
                    "2BP01",
                    format!("role \"{name}\" cannot be dropped because some objects depend on it"),
                )
                .with_detail(details.join("\n")));
            }
            doc.roles.remove(name);
            for r in doc.roles.values_mut() {
                r.member_of.retain(|m| m.role != *name);
            }
        }
        self.store_auth_doc(&doc)
    }

    /// Makes `member` a member of `role` (GRANT role TO member).
    fn add_member(
        &mut self,
        doc: &mut AuthDoc,
        role: &str,
        member: &str,
        admin: bool,
        me: &str,
        su: bool,
    ) -> Result<()> {
        if !doc.role_exists(role) {
            return Err(no_such_role(role));
        }
        if role == DATABASE_OWNER_ROLE_NAME {
            return Err(SqlError::new("XX000", format!("role \"{role}\" cannot have explicit members")));
        }
        let role_is_super = doc.is_superuser(role);
        if role_is_super && !su {
            return Err(SqlError::new("42501", "must be superuser to alter superusers"));
        }
        let has_admin =
            doc.roles.get(me).is_some_and(|r| r.createrole || r.member_of.iter().any(|m| m.role == role && m.admin));
        if !su && !has_admin {
            return Err(SqlError::new("42501", format!("must have admin option on role \"{role}\"")));
        }
        if !doc.roles.contains_key(member) {
            return Err(no_such_role(member));
        }
        if doc.is_member(role, member) {
            return Err(SqlError::new("0LP01", format!("role \"{role}\" is a member of role \"{member}\"")));
        }
        let grantor = me.to_owned();
        let Some(m) = doc.roles.get_mut(member) else { return Err(no_such_role(member)) };
        match m.member_of.iter_mut().find(|x| x.role == role) {
            Some(existing) if !admin || existing.admin => {
                self.notices.push(SqlNotice {
                    sqlstate: "00000",
                    message: format!("role \"{member}\" is already a member of role \"{role}\""),
                });
            }
            Some(existing) => existing.admin = true,
            None => m.member_of.push(Membership { role: role.to_owned(), admin, grantor }),
        }
        Ok(())
    }

    fn membership(&mut self, grant: bool, roles: &[String], grantees: &[String], admin: bool) -> Result<()> {
        let mut doc = self.auth_doc()?;
        let (me, su) = self.who(&doc);
        for role in roles {
            let role = self.resolve_role(role);
            for g in grantees {
                let g = self.resolve_role(g);
                if grant {
                    self.add_member(&mut doc, &role, &g, admin, &me, su)?;
                    continue;
                }
                if !doc.role_exists(&role) {
                    return Err(no_such_role(&role));
                }
                if doc.is_superuser(&role) && !su {
                    return Err(SqlError::new("42501", "must be superuser to alter superusers"));
                }
                let has_admin = doc
                    .roles
                    .get(&me)
                    .is_some_and(|r| r.createrole || r.member_of.iter().any(|m| m.role == role && m.admin));
                if !su && !has_admin {
                    return Err(SqlError::new("42501", format!("must have admin option on role \"{role}\"")));
                }
                let Some(m) = doc.roles.get_mut(&g) else { return Err(no_such_role(&g)) };
                match m.member_of.iter().position(|x| x.role == role) {
                    None => self.notices.push(SqlNotice {
                        sqlstate: "01000",
                        message: format!("role \"{g}\" is not a member of role \"{role}\""),
                    }),
                    Some(i) if admin => m.member_of[i].admin = false,
                    Some(i) => {
                        m.member_of.remove(i);
                    }
                }
            }
        }
        self.store_auth_doc(&doc)
    }

    fn set_role(&mut self, role: Option<&str>, local: bool) -> Result<()> {
        let value = match role {
            None => "none".to_owned(),
            Some(r) => {
                let doc = AuthDoc::read(self.txn.catalog())?.map(|(_, d)| d).unwrap_or_default();
                let session = self.settings.get("session_authorization").cloned().unwrap_or_default();
                let session_su = superuser(self.settings.auth(), Some(&doc), &session);
                let known = doc.role_exists(r) || self.is_unregistered_session_user(&doc, r);
                if !known {
                    return Err(no_such_role(r));
                }
                if !session_su && !doc.is_member(&session, r) {
                    return Err(SqlError::new("42501", format!("permission denied to set role \"{r}\"")));
                }
                r.to_owned()
            }
        };
        self.set_identity_setting("role", value, local);
        Ok(())
    }

    fn set_session_authorization(&mut self, role: Option<&str>, local: bool) -> Result<()> {
        let authenticated = self.settings.auth().authenticated.clone();
        let target = role.map_or_else(|| authenticated.clone(), str::to_owned);
        let doc = AuthDoc::read(self.txn.catalog())?.map(|(_, d)| d).unwrap_or_default();
        if target != authenticated {
            if !superuser(self.settings.auth(), Some(&doc), &authenticated) {
                return Err(SqlError::new("42501", "permission denied to set session authorization"));
            }
            if !doc.roles.contains_key(&target) {
                return Err(no_such_role(&target));
            }
        }
        self.set_identity_setting("session_authorization", target, local);
        self.set_identity_setting("role", "none".to_owned(), local);
        Ok(())
    }

    /// role / session_authorization: settings only these statements
    /// write (plain SET of them comes here too); is_superuser follows.
    fn set_identity_setting(&mut self, key: &str, value: String, local: bool) {
        if local && !self.settings.in_block() {
            // PostgreSQL checks the value, warns, and changes nothing.
            self.notices.push(SqlNotice {
                sqlstate: "25P01",
                message: "SET LOCAL can only be used in transaction blocks".into(),
            });
            return;
        }
        self.settings.set_scoped(key, value, local);
        let catalog = self.txn.catalog();
        let su = crate::catalog::roles::session_is_superuser(catalog, self.settings).unwrap_or(false);
        self.settings.set_scoped("is_superuser", if su { "on" } else { "off" }.to_owned(), local);
    }

    fn alter_owner(&mut self, relation: &str, kind: ObjectKind, written: &str) -> Result<()> {
        let owner = self.resolve_role(written);
        let mut doc = self.auth_doc()?;
        let (me, su) = self.who(&doc);
        if !doc.roles.contains_key(&owner) && !self.is_unregistered_session_user(&doc, &owner) {
            return Err(no_such_role(&owner));
        }
        let fallback = self.settings.auth().authenticated.clone();
        let current = doc.relation_owner(relation, &fallback).to_owned();
        if current == owner {
            return Ok(());
        }
        if !su {
            if !doc.is_member(&me, &current) {
                return Err(crate::catalog::roles::must_be_owner(kind, crate::names::short(relation)));
            }
            if !doc.is_member(&me, &owner) {
                return Err(SqlError::new("42501", format!("must be member of role \"{owner}\"")));
            }
            let schema = crate::names::split(relation).0;
            let schema_owner = crate::catalog::roles::schema_owner_of(self.txn.catalog(), &doc, schema, &fallback);
            let items = AuthDoc::effective_items(doc.schemas.get(schema), ObjectKind::Schema, &schema_owner);
            if !doc.held(&owner, &items).contains(Privs::CREATE) {
                return Err(permission_denied(ObjectKind::Schema, schema));
            }
        }
        let acl = doc.relations.entry(relation.to_owned()).or_default();
        // The old owner's items become the new owner's (aclnewowner).
        if let Some(items) = acl.items.as_mut() {
            for i in items.iter_mut() {
                if i.grantee == current {
                    i.grantee = owner.clone();
                }
                if i.grantor == current {
                    i.grantor = owner.clone();
                }
            }
        }
        acl.owner = Some(owner);
        self.store_auth_doc(&doc)
    }

    /// GRANT / REVOKE privileges, as aclchk.c's ExecGrantStmt: the grantor
    /// is the object's owner when the current role owns it (or is a
    /// superuser), else the current role, who needs the grant option.
    fn privileges(
        &mut self,
        grant: bool,
        privs: Option<Privs>,
        target: &GrantTarget,
        grantees: &[String],
        grant_option: bool,
        cascade: bool,
    ) -> Result<()> {
        let mut doc = self.auth_doc()?;
        let (me, su) = self.who(&doc);
        let grantees: Vec<String> = grantees.iter().map(|g| self.resolve_role(g)).collect();
        for g in &grantees {
            if !g.is_empty() && !doc.role_exists(g) && !self.is_unregistered_session_user(&doc, g) {
                return Err(no_such_role(g));
            }
        }
        let database = self.settings.get("pgtier.database").cloned().unwrap_or_default();
        let fallback = self.settings.auth().authenticated.clone();
        for (key, kind) in self.grant_objects(target, &database)? {
            let (owner, shown) = match kind {
                ObjectKind::Schema => {
                    (crate::catalog::roles::schema_owner_of(self.txn.catalog(), &doc, &key, &fallback), key.clone())
                }
                ObjectKind::Database => (doc.default_owner().unwrap_or(&fallback).to_owned(), database.clone()),
                _ => (doc.relation_owner(&key, &fallback).to_owned(), crate::names::short(&key).to_owned()),
            };
            let acl = match kind {
                ObjectKind::Schema => doc.schemas.get(&key).cloned(),
                ObjectKind::Database => Some(doc.database.clone()),
                _ => doc.relations.get(&key).cloned(),
            }
            .unwrap_or_default();
            let mut items = AuthDoc::effective_items(Some(&acl), kind, &owner);
            let wanted = privs.unwrap_or(kind.all());
            let owns = su || doc.is_member(&me, &owner);
            let grantor = if owns { owner.clone() } else { me.clone() };
            if !owns {
                let may_grant = doc.grantable(&me, &items);
                let holds = doc.held(&me, &items);
                if may_grant.is_empty() && holds.is_empty() {
                    return Err(permission_denied(kind, &shown));
                }
                let granted = may_grant.0 & wanted.0;
                if granted == 0 {
                    self.notices.push(SqlNotice {
                        sqlstate: "01007",
                        message: format!(
                            "no privileges were {} for \"{shown}\"",
                            if grant { "granted" } else { "revoked" }
                        ),
                    });
                    continue;
                }
                if granted != wanted.0 && privs.is_some() {
                    self.notices.push(SqlNotice {
                        sqlstate: "01007",
                        message: format!(
                            "not all privileges were {} for \"{shown}\"",
                            if grant { "granted" } else { "revoked" }
                        ),
                    });
                }
            }
            let wanted = if owns { wanted } else { Privs(wanted.0 & doc.grantable(&me, &items).0) };
            for g in &grantees {
                if grant {
                    grant_item(&mut items, g, &grantor, wanted, grant_option);
                } else {
                    revoke_item(&mut items, g, &grantor, wanted, grant_option, cascade)?;
                }
            }
            let new_acl = ObjectAcl { owner: acl.owner.clone(), items: Some(items) };
            match kind {
                ObjectKind::Schema => {
                    doc.schemas.insert(key, new_acl);
                }
                ObjectKind::Database => doc.database = new_acl,
                _ => {
                    doc.relations.insert(key, new_acl);
                }
            }
        }
        self.store_auth_doc(&doc)
    }

    /// The objects a GRANT names, with their kinds.
    fn grant_objects(&self, target: &GrantTarget, database: &str) -> Result<Vec<(String, ObjectKind)>> {
        let catalog = self.txn.catalog();
        Ok(match target {
            GrantTarget::Relations(rels) => rels.clone(),
            GrantTarget::AllInSchemas { schemas, sequences } => {
                let mut out = Vec::new();
                for s in schemas {
                    let exists =
                        matches!(s.as_str(), "public") || crate::catalog::user_schema_named(catalog, s).is_some();
                    if !exists {
                        return Err(SqlError::new("3F000", format!("schema \"{s}\" does not exist")));
                    }
                    for t in catalog.tables() {
                        if t.name.starts_with('\0') || crate::names::split(&t.name).0 != s.as_str() {
                            continue;
                        }
                        let kind = ObjectKind::of(t);
                        if (kind == ObjectKind::Sequence) == *sequences {
                            out.push((t.name.clone(), kind));
                        }
                    }
                }
                out
            }
            GrantTarget::Schemas(schemas) => {
                for s in schemas {
                    let exists = matches!(s.as_str(), "public" | "pg_catalog" | "information_schema")
                        || crate::catalog::user_schema_named(catalog, s).is_some();
                    if !exists {
                        return Err(SqlError::new("3F000", format!("schema \"{s}\" does not exist")));
                    }
                }
                schemas.iter().map(|s| (s.clone(), ObjectKind::Schema)).collect()
            }
            GrantTarget::Database(name) => {
                if name != database {
                    return Err(SqlError::new("3D000", format!("database \"{name}\" does not exist")));
                }
                vec![(String::new(), ObjectKind::Database)]
            }
        })
    }

    /// Relations or schemas were dropped (some by cascade, or a serial
    /// column's sequence with its column): their owners and ACLs go too,
    /// so a new object of the same name starts with none.
    pub(crate) fn prune_acls(&mut self) -> Result<()> {
        let Some((_, mut doc)) = AuthDoc::read(self.txn.catalog())? else { return Ok(()) };
        let catalog = self.txn.catalog();
        let before = (doc.relations.len(), doc.schemas.len());
        doc.relations.retain(|k, _| catalog.table_by_name(k).is_some());
        doc.schemas.retain(|k, _| k == "public" || crate::catalog::user_schema_named(catalog, k).is_some());
        if (doc.relations.len(), doc.schemas.len()) != before {
            self.store_auth_doc(&doc)?;
        }
        Ok(())
    }

    /// A relation is renamed: its owner and ACL follow.
    pub(crate) fn rename_relation_acl(&mut self, from: &str, to: &str) -> Result<()> {
        let Some((_, mut doc)) = AuthDoc::read(self.txn.catalog())? else { return Ok(()) };
        if doc.rename_relation(from, to) {
            self.store_auth_doc(&doc)?;
        }
        Ok(())
    }

    /// A relation was made by the current role: it owns it (recorded
    /// unless the current role is the default owner).
    pub(crate) fn record_owner(&mut self, key: &str) -> Result<()> {
        let Some((_, mut doc)) = AuthDoc::read(self.txn.catalog())? else { return Ok(()) };
        let me = current_role(self.settings).to_owned();
        if !doc.roles.contains_key(&me) || doc.default_owner() == Some(me.as_str()) {
            return Ok(());
        }
        doc.relations.insert(key.to_owned(), ObjectAcl { owner: Some(me), items: None });
        self.store_auth_doc(&doc)
    }
}

/// Adds `privs` (and their grant option) for `grantee` from `grantor`.
fn grant_item(items: &mut Vec<AclItem>, grantee: &str, grantor: &str, privs: Privs, grant_option: bool) {
    let grantable = if grant_option { privs } else { Privs::NONE };
    match items.iter_mut().find(|i| i.grantee == grantee && i.grantor == grantor) {
        Some(i) => {
            i.privs = i.privs.union(privs);
            i.grantable = i.grantable.union(grantable);
        }
        None => items.push(AclItem { grantee: grantee.to_owned(), grantor: grantor.to_owned(), privs, grantable }),
    }
}

/// Takes `privs` (or only their grant option) from `grantee`'s item from
/// `grantor`; what `grantee` granted on with them goes too with CASCADE,
/// else 2BP01.
fn revoke_item(
    items: &mut Vec<AclItem>,
    grantee: &str,
    grantor: &str,
    privs: Privs,
    option_only: bool,
    cascade: bool,
) -> Result<()> {
    let Some(pos) = items.iter().position(|i| i.grantee == grantee && i.grantor == grantor) else {
        return Ok(());
    };
    let losing = Privs(items[pos].grantable.0 & privs.0);
    if !losing.is_empty() && !grantee.is_empty() {
        let dependent = items.iter().any(|i| i.grantor == grantee && i.privs.intersects(losing));
        if dependent && !cascade {
            return Err(
                SqlError::new("2BP01", "dependent privileges exist").with_hint("Use CASCADE to revoke them too.")
            );
        }
        if dependent {
            let dependents: Vec<String> = items
                .iter()
                .filter(|i| i.grantor == grantee && i.privs.intersects(losing))
                .map(|i| i.grantee.clone())
                .collect();
            for d in dependents {
                revoke_item(items, &d, grantee, losing, false, true)?;
            }
        }
    }
    let Some(pos) = items.iter().position(|i| i.grantee == grantee && i.grantor == grantor) else {
        return Ok(());
    };
    let item = &mut items[pos];
    item.grantable = item.grantable.minus(privs);
    if !option_only {
        item.privs = item.privs.minus(privs);
    }
    if item.privs.is_empty() {
        items.remove(pos);
    }
    Ok(())
}
