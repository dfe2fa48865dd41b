//! Data-modifying WITH queries: INSERT / UPDATE / DELETE in the WITH clause
//! of the statement itself (PostgreSQL 15 refuses them in any other WITH
//! with 0A000, and MERGE in WITH everywhere). Each is bound once, as the
//! statement it is written as, and runs once, to its end, before the
//! primary query (`Prepared::modifying`), whether or not anything reads
//! it; a reference reads its RETURNING rows (`VirtualSource::Returning`).
//!
//! PostgreSQL runs every part of such a statement at one snapshot: no part
//! sees another's changes to a table, only the RETURNING rows. The engine
//! shows a transaction its own writes at once, so a part that reads what
//! an earlier one changed would see the change. Such a statement is
//! refused (0A000) rather than answered otherwise ([`Binder::check_parts`]):
//! - a part reads a table (FROM, a subquery, UPDATE's and DELETE's own
//!   target, INSERT ... ON CONFLICT's) that an earlier part changes, a
//!   DELETE's foreign-key cascade counting as a change of the referencing
//!   tables;
//! - a part writes a table a foreign key links to a table an earlier part
//!   writes, except a child written after its parent was only inserted
//!   into: PostgreSQL checks foreign keys at the statement's end, the
//!   engine as each row is written;
//! - two parts write one table with a unique constraint, one of them by
//!   UPDATE, DELETE (or a cascade) or INSERT ... ON CONFLICT: unique checks
//!   see every change at once in both systems, and PostgreSQL's order of
//!   the parts is not pgtier's (it runs a WITH query nothing reads after
//!   the primary query, one that is read as its reader pulls rows);
//! - two parts advance one sequence (or one whose name is not a constant):
//!   PostgreSQL interleaves their calls as its readers pull rows.
//!
//! Writing one table from two parts that do not read it (two INSERTs, or
//! a DELETE ... RETURNING whose rows an INSERT puts back into a table
//! without unique constraints) is answered: no part's answer depends on
//! the order.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use pgtier_engine::{DataType, TableSchema, Value};
use sqlparser::ast;

use super::Binder;
use crate::catalog::roles::Privs;
use crate::error::{Result, SqlError};
use crate::expr::{Expr, Func, SeqFunc, SysFunc};
use crate::plan::{ModifyingCte, Plan, VirtualSource};
use crate::value::types::RegKind;

/// What one part of a statement (a data-modifying WITH query, or the rest
/// of the statement) reads and writes, by stored relation name.
#[derive(Clone, Debug, Default)]
pub(crate) struct Touched {
    /// Tables whose rows it reads (SELECT, UPDATE or DELETE privilege
    /// needed, or an INSERT's ON CONFLICT).
    pub(crate) reads: BTreeSet<String>,
    pub(crate) inserts: BTreeSet<String>,
    /// UPDATE and DELETE targets.
    pub(crate) changes: BTreeSet<String>,
    /// INSERT ... ON CONFLICT targets.
    pub(crate) upserts: BTreeSet<String>,
    /// The sequences nextval / setval advance: a constant's identity, or
    /// None for one named by an expression.
    pub(crate) sequences: Vec<Option<String>>,
}

impl Touched {
    /// Adds what `other` touched.
    pub(crate) fn merge(&mut self, other: Touched) {
        self.reads.extend(other.reads);
        self.inserts.extend(other.inserts);
        self.changes.extend(other.changes);
        self.upserts.extend(other.upserts);
        self.sequences.extend(other.sequences);
    }
}

/// How far a data-modifying WITH query is bound.
#[derive(Clone, Debug)]
pub(crate) enum State {
    Pending,
    Binding,
    Bound { schema: Arc<TableSchema>, returning: bool },
}

/// Whether a WITH query is INSERT / UPDATE / DELETE (or MERGE).
pub(super) fn is_modifying(cte: &ast::Cte) -> bool {
    matches!(
        cte.query.body.as_ref(),
        ast::SetExpr::Insert(_) | ast::SetExpr::Update(_) | ast::SetExpr::Delete(_) | ast::SetExpr::Merge(_)
    )
}

/// PostgreSQL's refusals of a WITH clause holding data-modifying queries
/// where they may not be; `top`: it is the statement's own WITH.
pub(super) fn check_placement(with: &ast::With, top: bool, statement_is_query: bool) -> Result<()> {
    if with.cte_tables.iter().any(|c| matches!(c.query.body.as_ref(), ast::SetExpr::Merge(_))) {
        return Err(SqlError::new("0A000", "MERGE not supported in WITH query"));
    }
    if top || !with.cte_tables.iter().any(is_modifying) {
        return Ok(());
    }
    if !statement_is_query {
        return Err(SqlError::unsupported("a data-modifying WITH query in this statement (EXPLAIN, CREATE VIEW, ...)"));
    }
    Err(SqlError::new("0A000", "WITH clause containing a data-modifying statement must be at the top level"))
}

impl Binder<'_> {
    /// A reference to data-modifying WITH query `k`: its RETURNING rows.
    pub(super) fn modifying_reference(&mut self, k: usize) -> Result<(String, Arc<TableSchema>, VirtualSource)> {
        self.bind_modifying(k)?;
        let def = &self.ctes[k];
        match &def.modifying {
            Some(State::Bound { schema, returning: true }) => {
                Ok((def.name.clone(), Arc::clone(schema), VirtualSource::Returning(def.id)))
            }
            Some(State::Bound { returning: false, .. }) => {
                Err(SqlError::new("0A000", format!("WITH query \"{}\" does not have a RETURNING clause", def.name)))
            }
            _ => Err(SqlError::new("XX000", "data-modifying WITH query not bound")),
        }
    }

    /// Binds data-modifying WITH query `k` (once): its plan joins
    /// [`Binder::modifying`] after those it reads, which bind first.
    pub(super) fn bind_modifying(&mut self, k: usize) -> Result<()> {
        match &self.ctes[k].modifying {
            Some(State::Pending) => {}
            Some(State::Bound { .. }) => return Ok(()),
            Some(State::Binding) => {
                return Err(SqlError::new(
                    "42P19",
                    format!("recursive query \"{}\" must not contain data-modifying statements", self.ctes[k].name),
                ));
            }
            None => return Err(SqlError::new("XX000", "not a data-modifying WITH query")),
        }
        self.ctes[k].modifying = Some(State::Binding);
        self.ctes[k].uses += 1;
        let name = self.ctes[k].name.clone();
        let cte = self.ctes[k].cte.clone();
        // Outside WITH RECURSIVE a query sees only the ones before it.
        let later = if self.ctes[k].recursive { Vec::new() } else { self.ctes.split_off(k) };
        let others = std::mem::take(&mut self.touched);
        let correlated = self.correlated;
        let plan = self.modifying_statement(&cte.query);
        self.correlated = correlated;
        self.ctes.extend(later);
        let touched = std::mem::replace(&mut self.touched, others);
        let plan = plan?;
        if crate::plan::TableTriggers::fired_by(&plan) {
            return Err(SqlError::unsupported("a data-modifying WITH query on a table with triggers"));
        }
        let (columns, returning) = match &plan {
            Plan::Insert(i) => (&i.columns, !i.returning.is_empty()),
            Plan::Update(u) => (&u.columns, !u.returning.is_empty()),
            Plan::Delete(d) => (&d.columns, !d.returning.is_empty()),
            _ => return Err(SqlError::new("XX000", "data-modifying WITH query of another kind")),
        };
        let mut cols: Vec<(String, DataType)> =
            columns.iter().map(|c| (c.name.clone(), c.ty.unwrap_or(DataType::Text))).collect();
        let aliases = cte.alias.columns.iter().map(|c| super::ident(&c.name)).collect();
        super::recursive::rename_columns(&name, &mut cols, aliases)?;
        let schema = super::detached(&name, cols);
        self.modifying.push((ModifyingCte { id: self.ctes[k].id, plan }, touched));
        self.ctes[k].modifying = Some(State::Bound { schema, returning });
        Ok(())
    }

    fn modifying_statement(&mut self, q: &ast::Query) -> Result<Plan> {
        let (ast::SetExpr::Insert(s) | ast::SetExpr::Update(s) | ast::SetExpr::Delete(s)) = q.body.as_ref() else {
            return Err(SqlError::new("0A000", "MERGE not supported in WITH query"));
        };
        self.modifying_cte = true;
        let plan = match &q.with {
            None => self.statement(s),
            Some(with) => self.with_scope(with, &s.to_string(), |b| {
                b.modifying_cte = true;
                b.statement(s)
            }),
        };
        self.modifying_cte = false;
        plan
    }

    /// Records what a statement needing `needed` on relation `name` reads
    /// and writes.
    pub(super) fn touch(&mut self, name: &str, needed: Privs) {
        if needed.intersects(Privs::SELECT.union(Privs::UPDATE).union(Privs::DELETE)) {
            self.touched.reads.insert(name.to_owned());
        }
        if needed.intersects(Privs::INSERT) {
            self.touched.inserts.insert(name.to_owned());
        }
        if needed.intersects(Privs::UPDATE.union(Privs::DELETE)) {
            self.touched.changes.insert(name.to_owned());
        }
    }

    /// Records the sequences the nextval and setval calls in `exprs` advance.
    pub(super) fn touch_sequences<'e>(&mut self, exprs: impl IntoIterator<Item = &'e Expr>) {
        let mut args: Vec<Option<Value>> = Vec::new();
        for e in exprs {
            e.walk(&mut |x| {
                if let Expr::Func(Func::Sys(SysFunc::Sequence(SeqFunc::Nextval | SeqFunc::Setval)), a) = x {
                    args.push(a.first().and_then(constant));
                }
            });
        }
        for a in args {
            let identity = a.and_then(|v| self.sequence_identity(&v));
            self.touched.sequences.push(identity);
        }
    }

    /// A sequence argument's identity: its OID, or a cached table's
    /// PostgreSQL sequence key; None when it is not known.
    fn sequence_identity(&self, v: &Value) -> Option<String> {
        match v {
            Value::Text(t) => {
                Some(match crate::catalog::reg_lookup_in(self.catalog, self.path, &HashMap::new(), RegKind::Class, t) {
                    Ok(oid) => oid.to_string(),
                    Err(_) => format!("key {t}"),
                })
            }
            Value::Int2(n) => Some(n.to_string()),
            Value::Int4(n) => Some(n.to_string()),
            Value::Int8(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// The refusals of the module's header, over the data-modifying WITH
    /// queries in the order they run, then `primary` (the rest of the
    /// statement).
    pub(super) fn check_parts(&self, primary: &Touched) -> Result<()> {
        let parts: Vec<&Touched> = self.modifying.iter().map(|(_, t)| t).chain([primary]).collect();
        let changed: Vec<BTreeSet<String>> = parts.iter().map(|t| self.changed(t)).collect();
        let writes: Vec<BTreeSet<String>> =
            parts.iter().zip(&changed).map(|(t, c)| t.inserts.union(c).cloned().collect()).collect();
        for (j, later) in parts.iter().enumerate() {
            for (i, earlier) in parts[..j].iter().enumerate() {
                if let Some(t) = writes[i].intersection(&later.reads).next() {
                    return Err(SqlError::unsupported(format!(
                        "a data-modifying WITH query in a statement that reads table \"{}\" after changing it \
                         (PostgreSQL reads it as it was before the statement)",
                        crate::names::short(t)
                    )));
                }
                self.check_foreign_keys(earlier, &writes[i], &writes[j])?;
                for t in writes[i].intersection(&writes[j]) {
                    let ordered = [&changed[i], &changed[j], &earlier.upserts, &later.upserts];
                    if ordered.iter().any(|s| s.contains(t)) && self.has_unique_constraint(t) {
                        return Err(SqlError::unsupported(format!(
                            "a data-modifying WITH query in a statement whose parts change table \"{}\", which has \
                             a unique constraint, in an order PostgreSQL may not follow",
                            crate::names::short(t)
                        )));
                    }
                }
                let shared = earlier
                    .sequences
                    .iter()
                    .any(|a| later.sequences.iter().any(|b| a.is_none() || b.is_none() || a == b));
                if shared {
                    return Err(SqlError::unsupported(
                        "a data-modifying WITH query advancing a sequence that another part of the statement \
                         advances too (PostgreSQL interleaves their calls)",
                    ));
                }
            }
        }
        Ok(())
    }

    /// A part writing `later` after one that wrote `written` (`earlier`
    /// what it touched): refused when a foreign key links them, unless
    /// the earlier one only inserted the parent.
    fn check_foreign_keys(
        &self,
        earlier: &Touched,
        written: &BTreeSet<String>,
        later: &BTreeSet<String>,
    ) -> Result<()> {
        for name in written {
            let Some(table) = self.catalog.table_by_name(name) else { continue };
            let parents = self.catalog.foreign_keys_of(table.id).into_iter().map(|fk| fk.parent);
            let children = if earlier.changes.contains(name) {
                self.catalog.referencing(table.id).into_iter().map(|fk| fk.child).collect()
            } else {
                Vec::new()
            };
            for linked in parents.chain(children) {
                let Some(other) = self.catalog.table(linked) else { continue };
                if later.contains(&other.name) {
                    return Err(SqlError::unsupported(format!(
                        "a data-modifying WITH query in a statement that writes tables \"{}\" and \"{}\", which a \
                         foreign key links, in this order (PostgreSQL checks it at the statement's end)",
                        crate::names::short(name),
                        crate::names::short(&other.name)
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether a table has a primary key (not the hidden row id) or a
    /// unique index.
    fn has_unique_constraint(&self, name: &str) -> bool {
        self.catalog
            .table_by_name(name)
            .is_some_and(|t| !t.has_rowid() || self.catalog.indexes_of(t.id).iter().any(|i| i.unique && !i.primary))
    }

    /// The tables a part updates or deletes from: its targets and the
    /// tables that reference them, transitively (a cascade writes them).
    fn changed(&self, t: &Touched) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = t.changes.clone();
        let mut todo: Vec<String> = t.changes.iter().cloned().collect();
        while let Some(name) = todo.pop() {
            let Some(table) = self.catalog.table_by_name(&name) else { continue };
            for fk in self.catalog.referencing(table.id) {
                if let Some(child) = self.catalog.table(fk.child)
                    && out.insert(child.name.clone())
                {
                    todo.push(child.name.clone());
                }
            }
        }
        out
    }
}

fn constant(e: &Expr) -> Option<Value> {
    match e {
        Expr::Const(v) => Some(v.clone()),
        Expr::Cast(inner, ..) => constant(inner),
        _ => None,
    }
}
