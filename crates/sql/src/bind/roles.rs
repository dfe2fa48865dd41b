//! Roles and privileges at bind time: the DCL statements as plans
//! (CREATE/ALTER/DROP ROLE, GRANT/REVOKE, SET ROLE, SET SESSION
//! AUTHORIZATION, OWNER TO), and the privileges a statement needs on the
//! relations it names, recorded for the session to check each time the
//! plan runs (catalog/roles.rs `check_relations`).

use std::sync::Arc;

use pgtier_engine::TableSchema;
use sqlparser::ast;

use super::{Binder, Perm, ident};
use crate::catalog::roles::{ObjectKind, Privs};
use crate::error::{Result, SqlError};
use crate::plan::{Dcl, GrantTarget, Plan, RoleOptions};

impl Binder<'_> {
    /// The statement needs `needed` on `table`, checked as the current
    /// role (or, inside a view's query, as the view's owner).
    pub(super) fn need(&mut self, table: &TableSchema, needed: Privs) {
        self.touch(&table.name, needed);
        self.need_kind(&table.name, ObjectKind::of(table), needed);
        // A relation of a schema is reached through the schema: USAGE on
        // it (PUBLIC has USAGE on public; a temporary schema is the session's).
        let schema = crate::names::split(&table.name).0;
        if schema != "public" && !schema.starts_with("pg_temp") && !table.name.starts_with('\0') {
            let schema = schema.to_owned();
            self.need_kind(&schema, ObjectKind::Schema, Privs::USAGE);
        }
    }

    pub(super) fn need_kind(&mut self, object: &str, kind: ObjectKind, needed: Privs) {
        let via_view = self.perm_view.clone();
        if let Some(p) =
            self.perms.iter_mut().find(|p| p.relation == object && p.via_view == via_view && !p.owner && p.kind == kind)
        {
            p.needed = p.needed.union(needed);
            return;
        }
        self.perms.push(Perm { relation: object.to_owned(), kind, needed, owner: false, via_view });
    }

    /// UPDATE needs UPDATE, and SELECT when it reads the table: a WHERE,
    /// RETURNING, FROM, or a new value computed from its columns.
    pub(super) fn need_update(
        &mut self,
        table: &TableSchema,
        u: &ast::Update,
        assignments: &[(usize, crate::expr::Expr)],
    ) {
        self.need(table, Privs::UPDATE);
        let reads_columns = assignments.iter().any(|(_, e)| {
            let mut reads = e.has_subquery();
            e.walk(&mut |x| reads |= matches!(x, crate::expr::Expr::Column(_)));
            reads
        });
        if reads_columns || u.selection.is_some() || u.returning.is_some() || u.from.is_some() {
            self.need(table, Privs::SELECT);
        }
    }

    /// The statement changes `table`'s definition: its owner only.
    pub(super) fn need_owner(&mut self, table: &TableSchema) {
        let (object, kind) = (table.name.clone(), ObjectKind::of(table));
        if !self.perms.iter().any(|p| p.owner && p.relation == object) {
            self.perms.push(Perm { relation: object, kind, needed: Privs::NONE, owner: true, via_view: None });
        }
    }

    /// DROP SCHEMA: its owner only.
    pub(super) fn need_schema_owner(&mut self, schema: &str) {
        self.perms.push(Perm {
            relation: schema.to_owned(),
            kind: ObjectKind::Schema,
            needed: Privs::NONE,
            owner: true,
            via_view: None,
        });
    }

    /// The statement makes a relation in `schema`: CREATE on it.
    pub(super) fn need_create_in(&mut self, stored_name: &str) {
        let schema = crate::names::split(stored_name).0.to_owned();
        if schema.starts_with("pg_temp") {
            return;
        }
        self.need_kind(&schema, ObjectKind::Schema, Privs::CREATE);
    }

    /// Binds `v`'s query with its owner's privileges.
    pub(super) fn as_view_owner<T>(&mut self, v: &Arc<TableSchema>, f: impl FnOnce(&mut Self) -> T) -> T {
        self.need(v, Privs::SELECT);
        let outer = self.perm_view.replace(v.name.clone());
        let r = f(self);
        self.perm_view = outer;
        r
    }

    /// ALTER TABLE ... OWNER TO (the executor checks who may).
    pub(super) fn alter_owner(&mut self, table: &TableSchema, owner: &ast::Owner) -> Result<Plan> {
        let owner = match owner {
            ast::Owner::Ident(i) => ident(i),
            ast::Owner::CurrentRole => "\0current_role".to_owned(),
            ast::Owner::CurrentUser => "\0current_user".to_owned(),
            ast::Owner::SessionUser => "\0session_user".to_owned(),
        };
        Ok(dcl(Dcl::AlterOwner { relation: table.name.clone(), kind: ObjectKind::of(table), owner }))
    }

    pub(super) fn create_role(&mut self, c: &ast::CreateRole) -> Result<Plan> {
        let [name] = c.names.as_slice() else {
            return Err(SqlError::syntax("syntax error at or near \",\""));
        };
        let name = object_role_name(name)?;
        if c.if_not_exists {
            // Not PostgreSQL's syntax (sqlparser reads it).
            return Err(SqlError::syntax("syntax error at or near \"NOT\""));
        }
        let options = RoleOptions {
            superuser: c.superuser,
            createdb: c.create_db,
            createrole: c.create_role,
            inherit: c.inherit,
            login: c.login,
            replication: c.replication,
            bypassrls: c.bypassrls,
            connection_limit: c.connection_limit.as_ref().map(connection_limit).transpose()?,
            password: c.password.as_ref().map(password),
            valid_until: c.valid_until.as_ref().map(|e| Some(super::setting_text(e))),
        };
        if c.authorization_owner.is_some() {
            return Err(SqlError::unsupported("CREATE ROLE ... AUTHORIZATION"));
        }
        let names = |ids: &[ast::Ident]| ids.iter().map(ident).collect::<Vec<_>>();
        let mut in_roles = names(&c.in_role);
        in_roles.extend(names(&c.in_group));
        let mut members = names(&c.role);
        members.extend(names(&c.user));
        Ok(dcl(Dcl::CreateRole {
            name,
            if_not_exists: c.if_not_exists,
            options,
            in_roles,
            members,
            admins: names(&c.admin),
        }))
    }

    pub(super) fn alter_role(&mut self, name: &ast::Ident, op: &ast::AlterRoleOperation) -> Result<Plan> {
        let name = ident(name);
        match op {
            ast::AlterRoleOperation::RenameRole { role_name } => {
                Ok(dcl(Dcl::RenameRole { from: name, to: ident(role_name) }))
            }
            ast::AlterRoleOperation::WithOptions { options } => {
                let mut o = RoleOptions::default();
                for opt in options {
                    match opt {
                        ast::RoleOption::BypassRLS(b) => o.bypassrls = Some(*b),
                        ast::RoleOption::ConnectionLimit(e) => o.connection_limit = Some(connection_limit(e)?),
                        ast::RoleOption::CreateDB(b) => o.createdb = Some(*b),
                        ast::RoleOption::CreateRole(b) => o.createrole = Some(*b),
                        ast::RoleOption::Inherit(b) => o.inherit = Some(*b),
                        ast::RoleOption::Login(b) => o.login = Some(*b),
                        ast::RoleOption::Password(p) => o.password = Some(password(p)),
                        ast::RoleOption::Replication(b) => o.replication = Some(*b),
                        ast::RoleOption::SuperUser(b) => o.superuser = Some(*b),
                        ast::RoleOption::ValidUntil(e) => o.valid_until = Some(Some(super::setting_text(e))),
                    }
                }
                Ok(dcl(Dcl::AlterRole { name, options: o }))
            }
            other => Err(SqlError::unsupported(format!("ALTER ROLE ... {other}"))),
        }
    }

    pub(super) fn drop_roles(&mut self, names: &[ast::ObjectName], if_exists: bool) -> Result<Plan> {
        let names = names.iter().map(object_role_name).collect::<Result<Vec<_>>>()?;
        Ok(dcl(Dcl::DropRoles { names, if_exists }))
    }

    /// GRANT role TO role / REVOKE role FROM role (dialect.rs parses them).
    pub(super) fn membership(&mut self, grant: bool, values: &[ast::Expr]) -> Result<Plan> {
        let list = |e: Option<&ast::Expr>| -> Result<Vec<String>> {
            match e {
                Some(ast::Expr::Tuple(items)) => items
                    .iter()
                    .map(|i| match i {
                        ast::Expr::Identifier(id) => Ok(ident(id)),
                        other => Err(SqlError::syntax(format!("syntax error at or near \"{other}\""))),
                    })
                    .collect(),
                _ => Err(SqlError::new("XX000", "a role membership statement without its lists")),
            }
        };
        let roles = list(values.first())?;
        let grantees = list(values.get(1))?;
        let admin = matches!(values.get(2), Some(ast::Expr::Identifier(i)) if i.value == "admin");
        Ok(dcl(Dcl::Membership { grant, roles, grantees, admin }))
    }

    pub(super) fn grant(&mut self, g: &ast::Grant) -> Result<Plan> {
        if g.as_grantor.is_some() || g.current_grants.is_some() {
            return Err(SqlError::unsupported("this GRANT form"));
        }
        let target = self.grant_target(g.objects.as_ref())?;
        Ok(dcl(Dcl::Privileges {
            grant: true,
            privs: privileges(&g.privileges, &target)?,
            target,
            grantees: grantees(&g.grantees)?,
            grant_option: g.with_grant_option,
            cascade: false,
        }))
    }

    pub(super) fn revoke(&mut self, r: &ast::Revoke) -> Result<Plan> {
        let target = self.grant_target(r.objects.as_ref())?;
        Ok(dcl(Dcl::Privileges {
            grant: false,
            privs: privileges(&r.privileges, &target)?,
            target,
            grantees: grantees(&r.grantees)?,
            grant_option: false,
            cascade: matches!(r.cascade, Some(ast::CascadeOption::Cascade)),
        }))
    }

    fn grant_target(&mut self, objects: Option<&ast::GrantObjects>) -> Result<GrantTarget> {
        use ast::GrantObjects as G;
        let schema_names = |schemas: &[ast::ObjectName]| -> Result<Vec<String>> {
            schemas.iter().map(|s| super::parts(s).map(|p| p.join("."))).collect()
        };
        Ok(match objects {
            None => return Err(SqlError::syntax("syntax error at or near \"TO\"")),
            Some(G::Tables(names) | G::Views(names)) => {
                let mut out = Vec::new();
                for n in names {
                    let t = self.relation(n)?;
                    out.push((t.name.clone(), ObjectKind::of(&t)));
                }
                GrantTarget::Relations(out)
            }
            Some(G::Sequences(names)) => {
                let mut out = Vec::new();
                for n in names {
                    let t = self.relation(n)?;
                    if t.sequence.is_none() {
                        return Err(SqlError::new(
                            "42809",
                            format!("\"{}\" is not a sequence", crate::names::short(&t.name)),
                        ));
                    }
                    out.push((t.name.clone(), ObjectKind::Sequence));
                }
                GrantTarget::Relations(out)
            }
            Some(G::AllTablesInSchema { schemas }) => {
                GrantTarget::AllInSchemas { schemas: schema_names(schemas)?, sequences: false }
            }
            Some(G::AllSequencesInSchema { schemas }) => {
                GrantTarget::AllInSchemas { schemas: schema_names(schemas)?, sequences: true }
            }
            Some(G::Schemas(schemas)) => GrantTarget::Schemas(schema_names(schemas)?),
            Some(G::Databases(names)) => match names.as_slice() {
                [n] => GrantTarget::Database(super::parts(n)?.join(".")),
                _ => return Err(SqlError::unsupported("GRANT on several databases")),
            },
            Some(other) => return Err(SqlError::unsupported(format!("GRANT ON {other}"))),
        })
    }
}

fn dcl(d: Dcl) -> Plan {
    Plan::Dcl(Box::new(d))
}

/// A role name written as an object name (CREATE ROLE, DROP ROLE).
fn object_role_name(name: &ast::ObjectName) -> Result<String> {
    match super::parts(name)?.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(SqlError::syntax(format!("syntax error at or near \"{name}\""))),
    }
}

fn connection_limit(e: &ast::Expr) -> Result<i32> {
    let text = super::setting_text(e);
    let n: i32 = text.parse().map_err(|_| SqlError::syntax(format!("syntax error at or near \"{text}\"")))?;
    if n < -1 {
        return Err(SqlError::new("22023", format!("invalid connection limit: {n}")));
    }
    Ok(n)
}

fn password(p: &ast::Password) -> Option<String> {
    match p {
        ast::Password::NullPassword => None,
        ast::Password::Password(e) => Some(super::setting_text(e)),
    }
}

/// The grantees: role names, "" for PUBLIC; CURRENT_USER and the like are
/// resolved when the statement runs.
fn grantees(list: &[ast::Grantee]) -> Result<Vec<String>> {
    list.iter()
        .map(|g| match (&g.grantee_type, &g.name) {
            (ast::GranteesType::Public, _) => Ok(String::new()),
            (
                ast::GranteesType::None | ast::GranteesType::Role | ast::GranteesType::User | ast::GranteesType::Group,
                Some(ast::GranteeName::ObjectName(n)),
            ) => {
                // Keywords keep their spelling; sqlparser does not quote them.
                match n.0.as_slice() {
                    [p] => Ok(p
                        .as_ident()
                        .map(|i| {
                            let name = ident(i);
                            match name.as_str() {
                                "current_user" | "current_role" | "session_user" if i.quote_style.is_none() => {
                                    format!("\0{name}")
                                }
                                _ => name,
                            }
                        })
                        .unwrap_or_default()),
                    _ => Err(SqlError::syntax(format!("syntax error at or near \"{n}\""))),
                }
            }
            _ => Err(SqlError::unsupported("this grantee")),
        })
        .collect()
}

/// The privileges a GRANT or REVOKE names (None: ALL), checked against
/// what the object kind has (PostgreSQL: 0LP01 `invalid privilege type
/// X for table`).
fn privileges(p: &ast::Privileges, target: &GrantTarget) -> Result<Option<Privs>> {
    let actions = match p {
        ast::Privileges::All { .. } => return Ok(None),
        ast::Privileges::Actions(a) => a,
    };
    let (kind_word, allowed) = match target {
        GrantTarget::Relations(rels) if rels.iter().all(|(_, k)| *k == ObjectKind::Sequence) => {
            ("sequence", Privs::ALL_SEQUENCE)
        }
        GrantTarget::Relations(_) => ("table", Privs::ALL_TABLE),
        GrantTarget::AllInSchemas { sequences: true, .. } => ("sequence", Privs::ALL_SEQUENCE),
        GrantTarget::AllInSchemas { sequences: false, .. } => ("table", Privs::ALL_TABLE),
        GrantTarget::Schemas(_) => ("schema", Privs::ALL_SCHEMA),
        GrantTarget::Database(_) => ("database", Privs::ALL_DATABASE),
    };
    let mut out = Privs::NONE;
    for a in actions {
        let (p, columns) = match a {
            ast::Action::Select { columns } => (Privs::SELECT, columns.is_some()),
            ast::Action::Insert { columns } => (Privs::INSERT, columns.is_some()),
            ast::Action::Update { columns } => (Privs::UPDATE, columns.is_some()),
            ast::Action::References { columns } => (Privs::REFERENCES, columns.is_some()),
            ast::Action::Delete => (Privs::DELETE, false),
            ast::Action::Truncate => (Privs::TRUNCATE, false),
            ast::Action::Trigger => (Privs::TRIGGER, false),
            ast::Action::Usage => (Privs::USAGE, false),
            ast::Action::Create { obj_type: None } => (Privs::CREATE, false),
            ast::Action::Connect => (Privs::CONNECT, false),
            ast::Action::Temporary => (Privs::TEMPORARY, false),
            ast::Action::Execute { obj_type: None } => (Privs::EXECUTE, false),
            other => return Err(SqlError::unsupported(format!("privilege {other}"))),
        };
        if columns {
            return Err(SqlError::unsupported("column privileges"));
        }
        if !allowed.contains(p) {
            return Err(SqlError::new("0LP01", format!("invalid privilege type {} for {kind_word}", p.keyword())));
        }
        out = out.union(p);
    }
    Ok(Some(out))
}
