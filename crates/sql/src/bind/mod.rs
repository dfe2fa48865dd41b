//! Binder: sqlparser AST → plan. Resolves names against the engine catalog,
//! infers the types of literals and `$n` parameters from their context (as
//! PostgreSQL does for `unknown`), inserts the implicit casts PostgreSQL
//! would, and rejects what pgtier does not implement with 0A000 naming the
//! construct. Access-path choice is in `planner`.
//!
//! Here: the `Binder` and its name scopes, and the statement dispatch.
//! One file per statement kind (`ddl`, `select` with `from` and `setop`,
//! `dml`) and per kind of expression (`expr`, `operator`, `function`,
//! `aggregate`, `window`, `array`, `cast`); `coerce` holds PostgreSQL's
//! implicit coercions and type names.

mod aggregate;
mod alter;
mod array;
mod array_func;
mod builtin;
mod cast;
mod coerce;
mod colname;
mod ddl;
mod dml;
mod dml_from;
mod expr;
mod from;
mod function;
mod interval_fns;
mod json;
mod maintenance;
mod merge;
mod modifying;
mod operator;
mod partition;
mod plpgsql;
mod recursive;
mod relation_names;
mod roles;
mod rules;
mod schema;
mod select;
mod select_phases;
mod setop;
mod user_function;
mod user_type;
mod view;
mod window;

use std::sync::Arc;

use pgtier_engine::{Catalog, Column, DataType, IndexId, TableSchema, Value};
use sqlparser::ast::{self, Ident, ObjectName};

use crate::catalog::TableRows;
use crate::catalog::roles::RelationPerm as Perm;
use crate::catalog::search_path::{SearchPath, Target};
use crate::error::{Result, SqlError};
use crate::plan::{AggCall, Plan, Prepared, TxnCommand, WindowCall};
// A FROM relation is a plan type (the planner reads it); the binder builds them.
pub use crate::plan::Rel;

pub use coerce::map_type;

/// Unresolved type: an untyped literal, NULL or a parameter not yet typed.
pub type Ty = Option<DataType>;

pub fn bind_statement(
    catalog: &Catalog,
    rows: &dyn TableRows,
    path: &SearchPath,
    stmt: &ast::Statement,
) -> Result<Prepared> {
    let default_path = path.default_path(catalog);
    let view_path = default_path.as_ref().unwrap_or(path);
    let mut b = Binder { top_with: top_with(stmt), ..Binder::new(catalog, rows, path, view_path) };
    let mut plan = b.statement(stmt)?;
    if !b.modifying.is_empty()
        && !matches!(plan, Plan::Select(_) | Plan::Insert(_) | Plan::Update(_) | Plan::Delete(_) | Plan::Rules { .. })
    {
        return Err(SqlError::unsupported("a data-modifying WITH query in SELECT INTO"));
    }
    // Only a statement that calls a volatile function (nextval among them)
    // pays for printing its text.
    if b.volatile_calls
        && matches!(
            stmt,
            ast::Statement::Query(_)
                | ast::Statement::Insert(_)
                | ast::Statement::Update(_)
                | ast::Statement::Delete(_)
        )
    {
        select::refuse_partial_sequence_reads(&stmt.to_string())?;
    }
    cast::finish_plan_output(&mut plan);
    let param_types = b.params.iter().map(|t| t.unwrap_or(DataType::Text)).collect();
    Ok(Prepared {
        plan,
        modifying: b.modifying.into_iter().map(|(m, _)| m).collect(),
        perms: b.perms,
        param_types,
        deps: b.deps,
        indexes: b.indexes,
        reads_clock: false,
        search_path: Some(path.raw.clone()),
        names_stamp: catalog.names_stamp(),
    })
}

/// The address of the WITH clause of a statement that is a query, or a
/// WITH ... INSERT / UPDATE / DELETE: the one WITH clause that may hold
/// data-modifying queries (1 for such a statement without WITH, 0 for any
/// other statement).
impl<'c> Binder<'c> {
    /// A binder with nothing bound yet: a statement's (`bind_statement`)
    /// or a SQL function body's (`user_function`), which set what differs.
    fn new(catalog: &'c Catalog, rows: &'c dyn TableRows, path: &'c SearchPath, view_path: &'c SearchPath) -> Self {
        Binder {
            catalog,
            rows,
            path,
            view_path,
            creating_temp: false,
            params: Vec::new(),
            deps: Vec::new(),
            indexes: Vec::new(),
            next_subquery: 0,
            correlated: false,
            ctes: Vec::new(),
            sublink_depth: 0,
            work_tables: 0,
            shared_ctes: 0,
            volatile_calls: false,
            lazy_folding: false,
            view_depth: 0,
            named_windows: Vec::new(),
            perms: Vec::new(),
            perm_view: None,
            insert_table: None,
            rule_stack: Vec::new(),
            rules_skip: None,
            modifying_cte: false,
            top_with: 0,
            touched: modifying::Touched::default(),
            modifying: Vec::new(),
            function: None,
            defining_view: false,
            partition_fanout: false,
        }
    }
}

fn top_with(stmt: &ast::Statement) -> usize {
    match stmt {
        ast::Statement::Query(q) => q.with.as_ref().map_or(1, |w| std::ptr::from_ref(w) as usize),
        _ => 0,
    }
}

pub fn ident(i: &Ident) -> String {
    if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() }
}

/// Name parts as identifiers.
pub(crate) fn parts(name: &ObjectName) -> Result<Vec<String>> {
    name.0
        .iter()
        .map(|p| p.as_ident().map(ident).ok_or_else(|| SqlError::unsupported(format!("name {name}"))))
        .collect()
}

#[derive(Default)]
pub struct Scope<'p> {
    pub rels: Vec<Rel>,
    /// Joined-row positions `*` skips (the right side of JOIN ... USING).
    pub hidden: Vec<usize>,
    /// The positions `*` lists, in its order, once JOIN ... USING or
    /// NATURAL reordered them (merged columns first); empty: every
    /// relation's visible columns in turn, less `hidden`.
    pub star: Vec<usize>,
    /// Merged USING columns that are not their kept column as it is: the
    /// kept position and its conversion to the pair's common type (a
    /// LEFT JOIN USING of int with bigint is the left one as bigint).
    pub merged: Vec<(usize, crate::expr::Expr, DataType)>,
    pub outer: Option<&'p Scope<'p>>,
}

impl Scope<'_> {
    fn width(&self) -> usize {
        self.rels.last().map_or(0, |r| r.offset + r.table.columns.len())
    }

    /// The joined-row positions `*` stands for, in PostgreSQL's order.
    pub fn star_positions(&self) -> Vec<usize> {
        if !self.star.is_empty() {
            return self.star.clone();
        }
        self.rels
            .iter()
            .flat_map(|r| (0..r.table.visible_columns().len()).map(|i| r.offset + i))
            .filter(|p| !self.hidden.contains(p))
            .collect()
    }

    /// What `*` stands for: each column's name, expression and type.
    pub fn star_items(&self) -> Result<Vec<(String, crate::expr::Expr, DataType)>> {
        self.star_positions()
            .into_iter()
            .map(|pos| {
                let c =
                    self.column_at(pos).ok_or_else(|| SqlError::new("XX000", "`*` position outside the joined row"))?;
                Ok(match self.merged.iter().find(|(p, ..)| *p == pos) {
                    Some((_, e, ty)) => (c.name.clone(), e.clone(), *ty),
                    None => (c.name.clone(), crate::expr::Expr::Column(pos), user_type::readable(c.ty)?),
                })
            })
            .collect()
    }

    /// The column at a joined-row position.
    pub fn column_at(&self, pos: usize) -> Option<&pgtier_engine::Column> {
        let r = self.rels.iter().find(|r| pos >= r.offset && pos < r.offset + r.table.columns.len())?;
        r.table.columns.get(pos - r.offset)
    }

    /// Qualified name of a joined-row position, for error messages.
    pub fn column_name(&self, pos: usize) -> String {
        for r in &self.rels {
            if pos >= r.offset && pos < r.offset + r.table.columns.len() {
                return format!("{}.{}", r.name, r.table.columns[pos - r.offset].name);
            }
        }
        format!("#{pos}")
    }
}

/// Where an expression is bound: whether aggregates may appear.
pub(crate) struct ExprCtx {
    aggs: Option<Vec<AggCall>>,
    /// Window functions met so far; None where none is allowed.
    windows: Option<Vec<WindowCall>>,
    /// Clause name for "aggregate functions are not allowed in WHERE".
    clause: &'static str,
    in_agg: bool,
}

impl ExprCtx {
    pub(crate) fn plain(clause: &'static str) -> ExprCtx {
        ExprCtx { aggs: None, windows: None, clause, in_agg: false }
    }
}

pub(crate) struct Binder<'c> {
    pub(crate) catalog: &'c Catalog,
    /// Table sizes for the join order (`planner::join_order`).
    pub(crate) rows: &'c dyn TableRows,
    /// Where unqualified relation names are looked up (crate::names).
    pub(crate) path: &'c SearchPath,
    /// The default search path: a view's query is bound under it, whatever
    /// the session's path (CREATE VIEW refuses a query it would read
    /// differently), as PostgreSQL keeps a view's relations resolved.
    pub(crate) view_path: &'c SearchPath,
    /// Binding CREATE TEMP TABLE: new relations go to the temporary schema.
    pub(crate) creating_temp: bool,
    pub(crate) params: Vec<Ty>,
    pub(crate) deps: Vec<Arc<TableSchema>>,
    pub(crate) indexes: Vec<IndexId>,
    pub(crate) next_subquery: usize,
    /// Set when a name resolved to the enclosing query (correlation).
    pub(crate) correlated: bool,
    /// WITH queries in scope, outermost first (a name finds the innermost).
    pub(crate) ctes: Vec<CteDef>,
    /// How many subqueries in expressions the binder is inside: a
    /// recursive reference must not be in one (FROM subqueries are fine).
    pub(crate) sublink_depth: usize,
    /// Work tables handed out to WITH RECURSIVE queries of this statement.
    pub(crate) work_tables: usize,
    /// Ids handed out to the WITH queries of this statement (the key of
    /// a materialized one's rows, `VirtualSource::Shared`).
    pub(crate) shared_ctes: usize,
    /// Set when a volatile function (random(), nextval(), ...) is bound:
    /// a WITH query that calls one is materialized.
    pub(crate) volatile_calls: bool,
    /// Inside an expression PostgreSQL's planner drops without simplifying
    /// it (a COALESCE argument after a non-null constant, a CASE arm after
    /// a true or with a false condition, AND after false, OR after true):
    /// a constant that fails to fold stays unfolded there, so its error
    /// comes only if it is evaluated, which it never is ([`Binder::lazily`]).
    pub(crate) lazy_folding: bool,
    /// Views being expanded around the query now bound.
    pub(crate) view_depth: usize,
    /// The WINDOW clause of the SELECT now bound (each query level its own).
    pub(crate) named_windows: Vec<window::NamedWindow>,
    /// Privileges the statement needs (roles.rs records them).
    pub(crate) perms: Vec<Perm>,
    /// The view whose query is bound now: its relations are checked with
    /// its owner's privileges, as PostgreSQL checks a view's.
    pub(crate) perm_view: Option<String>,
    /// The address of the statement's own WITH clause (`top_with`), the
    /// only one where INSERT / UPDATE / DELETE may appear; 1 once bound (or
    /// a query without one), 0 for a statement that is no query.
    pub(crate) top_with: usize,
    /// The tables and sequences the part of the statement now bound reads
    /// and writes (modifying.rs: a data-modifying WITH query and the rest
    /// of the statement must not see one another's changes).
    pub(crate) touched: modifying::Touched,
    /// The data-modifying WITH queries bound so far, in the order they
    /// run, with what each touches.
    pub(crate) modifying: Vec<(crate::plan::ModifyingCte, modifying::Touched)>,
    /// Binding a SQL function's body: its argument names (unnamed: "")
    /// and how many function bodies are bound around this one.
    pub(crate) function: Option<user_function::BodyScope>,
    /// Binding CREATE VIEW's query.
    pub(crate) defining_view: bool,
    /// Binding an UPDATE or DELETE of a partitioned table, partition by
    /// partition (bind/partition.rs).
    pub(crate) partition_fanout: bool,
    /// The table an INSERT now bound writes: the type of a subscripted
    /// target's NULL base (`Binder::subscript_assign`).
    pub(crate) insert_table: Option<Arc<TableSchema>>,
    /// Relations and events whose rules are being applied (rules.rs):
    /// an action firing them again is PostgreSQL's infinite recursion.
    pub(crate) rule_stack: Vec<(String, crate::catalog::rules::RuleEvent)>,
    /// The relation whose rules the statement bound next skips: it is
    /// the original statement of their rewrite.
    pub(crate) rules_skip: Option<String>,
    /// The statement bound next is a data-modifying WITH query's.
    pub(crate) modifying_cte: bool,
}

/// A WITH query. Each reference binds its query again, as a subquery in
/// FROM would be. PostgreSQL 12+ inlines a query referenced once and runs
/// one referenced more often once, sharing its rows: the two agree unless
/// it calls a volatile function (or is recursive), so a query that calls
/// one, or is declared MATERIALIZED, is read through
/// `VirtualSource::Shared` under `id` and runs once per statement.
pub(crate) struct CteDef {
    pub(crate) name: String,
    pub(crate) cte: ast::Cte,
    /// This WITH clause's instance of the query: its rows' key when shared.
    pub(crate) id: usize,
    pub(crate) uses: usize,
    /// Its name appears more than once in the statement (an upper bound
    /// of its references): PostgreSQL materializes a WITH query read
    /// twice, so it runs once.
    pub(crate) named_twice: bool,
    /// Bound by some reference as shared (`VirtualSource::Shared`).
    pub(crate) shared: bool,
    /// Declared in WITH RECURSIVE.
    pub(crate) recursive: bool,
    /// What naming it means while its own definition is bound.
    pub(crate) self_ref: recursive::SelfRef,
    /// INSERT / UPDATE / DELETE in WITH: how far it is bound.
    pub(crate) modifying: Option<modifying::State>,
}

/// A row shape from column names and types.
fn detached(name: &str, columns: Vec<(String, DataType)>) -> Arc<TableSchema> {
    Arc::new(TableSchema::detached(
        name,
        columns
            .into_iter()
            .map(|(n, ty)| Column { name: n, ty, nullable: true, default: None, sequence: None, default_sql: None })
            .collect(),
    ))
}

fn missing_from(q: &str) -> SqlError {
    SqlError::new("42P01", format!("missing FROM-clause entry for table \"{q}\""))
}

fn check_transaction_modes(modes: &[ast::TransactionMode]) -> Result<()> {
    for m in modes {
        match m {
            ast::TransactionMode::IsolationLevel(ast::TransactionIsolationLevel::ReadCommitted)
            | ast::TransactionMode::AccessMode(ast::TransactionAccessMode::ReadWrite) => {}
            other => return Err(SqlError::unsupported(format!("transaction mode {other}"))),
        }
    }
    Ok(())
}

fn setting_text(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        ast::Expr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    }
}

/// `SET role` and `SET session_authorization` (and their RESET) are SET
/// ROLE and SET SESSION AUTHORIZATION, which check the role.
fn identity_setting(name: &str, value: &str, local: bool, reset: bool) -> Option<Plan> {
    let default = value.eq_ignore_ascii_case("default");
    match name {
        "role" => Some(Plan::Dcl(Box::new(crate::plan::Dcl::SetRole {
            role: (!default && !value.eq_ignore_ascii_case("none")).then(|| value.to_owned()),
            local,
            reset,
        }))),
        "session_authorization" => Some(Plan::Dcl(Box::new(crate::plan::Dcl::SetSessionAuthorization {
            role: (!default).then(|| value.to_owned()),
            local,
            reset,
        }))),
        _ => None,
    }
}

fn statement_kind(s: &ast::Statement) -> String {
    let text = s.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    words.join(" ")
}

fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

impl<'c> Binder<'c> {
    /// A stored table to write or change: not a view (pgtier does not
    /// write through views, PostgreSQL's automatically updatable ones
    /// included).
    fn table(&mut self, name: &ObjectName) -> Result<Arc<TableSchema>> {
        let t = self.relation(name)?;
        if crate::catalog::is_view(&t) {
            return Err(SqlError::unsupported(format!("writing to view \"{}\"", t.name)));
        }
        Ok(t)
    }

    /// A stored table or view by name.
    fn relation(&mut self, name: &ObjectName) -> Result<Arc<TableSchema>> {
        let t = match self.target(name)? {
            Some(Target::System(rel)) => {
                return Err(SqlError::new("42501", format!("permission denied for table {}", rel.def().name)));
            }
            Some(Target::Stored(k)) => self.catalog.table_by_name(&k).cloned(),
            None => None,
        };
        let t = t.ok_or_else(|| {
            SqlError::undefined_table(&parts(name).map(|p| p.join(".")).unwrap_or_default())
                .at(sqlparser::ast::Spanned::span(name))
        })?;
        if !self.deps.iter().any(|d| Arc::ptr_eq(d, &t)) {
            self.deps.push(t.clone());
        }
        Ok(t)
    }

    /// CREATE / DROP FUNCTION and TRIGGER.
    fn routine(&mut self, stmt: &ast::Statement) -> Result<Plan> {
        match stmt {
            ast::Statement::CreateFunction(f) => self.create_function(f),
            ast::Statement::DropFunction(d) => self.drop_function(d),
            ast::Statement::CreateTrigger(c) if crate::dialect::is_rule(c) => self.create_rule(c),
            ast::Statement::DropTrigger(d) if crate::dialect::is_drop_rule(d) => self.drop_rule(d),
            ast::Statement::CreateTrigger(c) => self.create_trigger(c),
            ast::Statement::DropTrigger(d) => self.drop_trigger(d),
            _ => Err(SqlError::new("XX000", "not a function or trigger statement")),
        }
    }

    /// EXPLAIN: the plan's lines now; the SELECT kept for the path it takes
    /// when run (exec/columnar).
    fn explain(
        &mut self,
        analyze: bool,
        format: bool,
        options: Option<&[ast::UtilityOption]>,
        statement: &ast::Statement,
    ) -> Result<Plan> {
        // Options that only change what is printed (COSTS, VERBOSE, ...)
        // are accepted: pgtier prints no costs either way.
        let analyzed = analyze
            || options.iter().copied().flatten().any(|o| {
                ident(&o.name) == "analyze"
                    && !matches!(&o.arg, Some(ast::Expr::Value(v)) if v.value == ast::Value::Boolean(false))
            });
        let formatted = format
            || options.iter().copied().flatten().any(|o| {
                ident(&o.name) == "format" && o.arg.as_ref().is_some_and(|a| a.to_string().to_lowercase() != "text")
            });
        if analyzed || formatted {
            return Err(SqlError::unsupported("EXPLAIN ANALYZE and formats other than text"));
        }
        let inner = self.statement(statement)?;
        let lines = crate::explain::explain(&inner, self.catalog)
            .ok_or_else(|| SqlError::unsupported("EXPLAIN of this statement"))?;
        let select = match inner {
            Plan::Select(s) => Some(Box::new(s)),
            _ => None,
        };
        Ok(Plan::Explain {
            lines,
            columns: vec![crate::plan::OutputColumn { name: "QUERY PLAN".into(), ty: Some(DataType::Text) }],
            select,
        })
    }

    fn statement(&mut self, stmt: &ast::Statement) -> Result<Plan> {
        use ast::Statement as S;
        match stmt {
            S::Query(q) => match (q.body.as_ref(), &q.with) {
                (ast::SetExpr::Select(s), _) if s.into.is_some() => self.select_into(q, s),
                // WITH ... INSERT / UPDATE / DELETE: the WITH queries are in
                // scope of the statement, which reads them as any query does.
                (
                    ast::SetExpr::Insert(inner) | ast::SetExpr::Update(inner) | ast::SetExpr::Delete(inner),
                    Some(with),
                ) if q.order_by.is_none() && q.limit_clause.is_none() && q.fetch.is_none() && q.locks.is_empty() => {
                    self.with_scope(with, &inner.to_string(), |b| b.statement(inner))
                }
                _ => Ok(Plan::Select(self.query(q, None)?)),
            },
            S::Explain { analyze, format, options, statement, .. } => {
                self.explain(*analyze, format.is_some(), options.as_deref(), statement)
            }
            S::Insert(i) => self.insert(i),
            S::Update(u) => self.update(u),
            S::Delete(d) => self.delete(d),
            S::Merge(m) => self.merge(m),
            S::CreateTable(c) => self.create_table(c),
            S::CreateIndex(c) => self.create_index(c),
            S::AlterTable(a) => self.alter_table(a),
            S::AlterIndex { name, operation } => self.alter_index(name, operation),
            S::Truncate(t) => self.truncate(t),
            S::CreateSequence { temporary, if_not_exists, name, data_type, sequence_options, owned_by } => {
                if *temporary {
                    return Err(SqlError::unsupported("CREATE TEMPORARY SEQUENCE"));
                }
                if owned_by.as_ref().is_some_and(|o| o.to_string().to_lowercase() != "none") {
                    return Err(SqlError::unsupported("CREATE SEQUENCE ... OWNED BY"));
                }
                let ty = match data_type {
                    None => DataType::Int8,
                    Some(t) => map_type(t)?,
                };
                let options = self.sequence_options(ty, sequence_options)?;
                Ok(Plan::CreateSequence { name: self.new_relation_key(name)?, options, if_not_exists: *if_not_exists })
            }
            S::CreateView(cv) => self.create_view(cv),
            S::CreateSchema {
                schema_name,
                if_not_exists,
                with: None,
                options: None,
                default_collate_spec: None,
                clone: None,
            } => self.create_schema(schema_name, *if_not_exists),
            S::Drop { object_type: ast::ObjectType::Schema, if_exists, names, cascade, .. } => {
                let names = schema::drop_schema_names(names)?;
                for n in &names {
                    self.need_schema_owner(n);
                }
                Ok(Plan::DropSchema { names, if_exists: *if_exists, cascade: *cascade })
            }
            S::CreateFunction(_) | S::DropFunction(_) | S::CreateTrigger(_) | S::DropTrigger(_) => self.routine(stmt),
            s if user_type::is_type_statement(s) => self.type_statement(s),
            S::Drop { object_type: ast::ObjectType::Role | ast::ObjectType::User, if_exists, names, .. } => {
                self.drop_roles(names, *if_exists)
            }
            S::Drop { object_type, if_exists, names, cascade, restrict: _, purge: _, temporary: _, table: _ } => {
                self.drop_relations(object_type, *if_exists, names, *cascade)
            }
            S::StartTransaction { modes, .. } => {
                check_transaction_modes(modes)?;
                Ok(Plan::Txn(TxnCommand::Begin))
            }
            S::Commit { chain: false, .. } => Ok(Plan::Txn(TxnCommand::Commit)),
            S::Rollback { chain: false, savepoint: None } => Ok(Plan::Txn(TxnCommand::Rollback)),
            S::Rollback { chain: false, savepoint: Some(name) } => Ok(Plan::Txn(TxnCommand::RollbackTo(ident(name)))),
            S::Savepoint { name } => Ok(Plan::Txn(TxnCommand::Savepoint(ident(name)))),
            S::ReleaseSavepoint { name } => Ok(Plan::Txn(TxnCommand::Release(ident(name)))),
            S::Set(set) => self.set(set),
            // RESET x is SET x TO DEFAULT.
            S::Reset(ast::ResetStatement { reset: ast::Reset::ConfigurationParameter(name) }) => {
                let name = name
                    .0
                    .iter()
                    .map(|p| p.as_ident().map_or_else(|| p.to_string().to_lowercase(), ident))
                    .collect::<Vec<_>>()
                    .join(".");
                if let Some(plan) = identity_setting(&name, "DEFAULT", false, true) {
                    return Ok(plan);
                }
                Ok(Plan::Set { name, value: "DEFAULT".into(), local: false, reset: true })
            }
            S::CreateRole(c) => self.create_role(c),
            S::AlterRole { name, operation } => self.alter_role(name, operation),
            S::Grant(g) => self.grant(g),
            S::Revoke(r) => self.revoke(r),
            S::ShowVariable { variable } => {
                let name = variable.iter().map(|i| i.value.to_lowercase()).collect::<Vec<_>>().join(" ");
                Ok(Plan::Show { name })
            }
            other => self.maintenance(other),
        }
    }

    /// DROP TABLE / SEQUENCE / VIEW / INDEX: only the owner drops a
    /// relation (of an index: its table's owner).
    fn drop_relations(
        &mut self,
        object_type: &ast::ObjectType,
        if_exists: bool,
        names: &[ObjectName],
        cascade: bool,
    ) -> Result<Plan> {
        let names = names.iter().map(|n| self.relation_key(n)).collect::<Result<Vec<_>>>()?;
        for n in &names {
            let catalog = self.catalog;
            let owned = match catalog.table_by_name(n) {
                Some(t) => Some(Arc::clone(t)),
                None => catalog.index_by_name(n).and_then(|i| catalog.table(i.table)).cloned(),
            };
            if let Some(t) = owned {
                self.need_owner(&t);
            }
        }
        match object_type {
            ast::ObjectType::Table => Ok(Plan::DropTable { names, if_exists, sequences: false, cascade }),
            ast::ObjectType::Sequence => Ok(Plan::DropTable { names, if_exists, sequences: true, cascade }),
            ast::ObjectType::View => Ok(Plan::DropView { names, if_exists, cascade }),
            ast::ObjectType::Index => Ok(Plan::DropIndex { names, if_exists }),
            other => Err(SqlError::unsupported(format!("DROP {other}"))),
        }
    }

    /// SET CONSTRAINTS (parsed by dialect.rs): the foreign keys it names,
    /// found by name in the search path's schemas (a qualified name: in
    /// its schema). Naming a constraint that is not deferrable is 42809, as
    /// in PostgreSQL (every constraint but a foreign key is NOT DEFERRABLE
    /// here: DEFERRABLE is refused for the others).
    fn set_constraints(&mut self, values: &[ast::Expr]) -> Result<Plan> {
        let Some((mode, names)) = values.split_last() else {
            return Err(SqlError::new("XX000", "SET CONSTRAINTS without a mode"));
        };
        let deferred = matches!(mode, ast::Expr::Identifier(i) if i.value == "deferred");
        if names.is_empty() {
            return Ok(Plan::SetConstraints { which: None, deferred });
        }
        let mut ids = Vec::new();
        for name in names {
            let parts: Vec<String> = match name {
                ast::Expr::CompoundIdentifier(parts) => parts.iter().map(ident).collect(),
                other => return Err(SqlError::new("42601", format!("syntax error at or near \"{other}\""))),
            };
            let (schemas, cname): (Vec<&str>, &str) = match parts.as_slice() {
                [name] => (self.path.schemas.iter().map(String::as_str).collect(), name),
                [schema, name] => (vec![schema.as_str()], name),
                _ => {
                    return Err(SqlError::new(
                        "42601",
                        format!("improper qualified name (too many dotted names): {}", parts.join(".")),
                    ));
                }
            };
            let in_path = |table: &str| schemas.contains(&crate::names::split(table).0);
            let mut found = false;
            for table in self.catalog.tables().filter(|t| in_path(&t.name)) {
                for fk in self.catalog.foreign_keys_of(table.id) {
                    if fk.name == cname {
                        if !fk.timing.deferrable() {
                            return Err(SqlError::new("42809", format!("constraint \"{cname}\" is not deferrable")));
                        }
                        found = true;
                        ids.push(fk.id);
                    }
                }
                let other = self.catalog.indexes_of(table.id).iter().any(|i| i.name == cname)
                    || table.checks.iter().any(|c| c.name == cname);
                if other {
                    return Err(SqlError::new("42809", format!("constraint \"{cname}\" is not deferrable")));
                }
            }
            if !found {
                return Err(SqlError::new("42704", format!("constraint \"{cname}\" does not exist")));
            }
        }
        Ok(Plan::SetConstraints { which: Some(ids), deferred })
    }

    fn set(&mut self, set: &ast::Set) -> Result<Plan> {
        match set {
            ast::Set::SingleAssignment { scope: None, hivevar: false, variable, values }
                if matches!(variable.0.as_slice(), [part] if part.as_ident().is_some_and(|i| {
                    i.quote_style.is_none() && i.value == crate::dialect::SET_CONSTRAINTS_VARIABLE
                })) =>
            {
                self.set_constraints(values)
            }
            ast::Set::SingleAssignment { scope: None, hivevar: false, variable, values }
                if matches!(variable.0.as_slice(), [part] if part.as_ident().is_some_and(|i| {
                    i.quote_style.is_none()
                        && (i.value == crate::dialect::GRANT_ROLE_VARIABLE
                            || i.value == crate::dialect::REVOKE_ROLE_VARIABLE)
                })) =>
            {
                let grant = variable.to_string() == crate::dialect::GRANT_ROLE_VARIABLE;
                self.membership(grant, values)
            }
            ast::Set::SetRole { context_modifier, role_name } => Ok(Plan::Dcl(Box::new(crate::plan::Dcl::SetRole {
                role: role_name.as_ref().map(ident),
                local: matches!(context_modifier, Some(ast::ContextModifier::Local)),
                reset: false,
            }))),
            ast::Set::SetSessionAuthorization(p) => {
                Ok(Plan::Dcl(Box::new(crate::plan::Dcl::SetSessionAuthorization {
                    role: match &p.kind {
                        ast::SetSessionAuthorizationParamKind::Default => None,
                        ast::SetSessionAuthorizationParamKind::User(u) => Some(ident(u)),
                    },
                    local: matches!(p.scope, ast::ContextModifier::Local),
                    reset: false,
                })))
            }
            ast::Set::SingleAssignment { scope, hivevar: false, variable, values } => {
                // `SET "application_name"` names the same setting as `SET application_name`.
                let name = variable
                    .0
                    .iter()
                    .map(|p| p.as_ident().map_or_else(|| p.to_string().to_lowercase(), ident))
                    .collect::<Vec<_>>()
                    .join(".");
                let value = values.iter().map(setting_text).collect::<Vec<_>>().join(", ");
                let local = matches!(scope, Some(ast::ContextModifier::Local));
                if let Some(plan) = identity_setting(&name, &value, local, false) {
                    return Ok(plan);
                }
                Ok(Plan::Set { name, value, local, reset: false })
            }
            ast::Set::SetTimeZone { local, value } => {
                // SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE: a fixed
                // offset, which PostgreSQL shows as the POSIX `<+05:30>-05:30`.
                let value = match value {
                    ast::Expr::Interval(iv) => {
                        let v = crate::value::parse_input(&setting_text(&iv.value), DataType::Interval)?;
                        let Value::Interval(v) = v else {
                            return Err(SqlError::new("22023", "invalid interval time zone"));
                        };
                        if v.months != 0 || v.days != 0 {
                            return Err(SqlError::new(
                                "22023",
                                "invalid interval value for time zone: day not allowed",
                            ));
                        }
                        let east = i32::try_from(v.micros / 1_000_000)
                            .map_err(|_| SqlError::new("22023", "invalid interval value for time zone"))?;
                        crate::tz::fixed_setting(east).1
                    }
                    other => setting_text(other),
                };
                Ok(Plan::Set { name: "timezone".into(), value, local: *local, reset: false })
            }
            ast::Set::SetNames { charset_name, .. } => Ok(Plan::Set {
                name: "client_encoding".into(),
                value: charset_name.value.clone(),
                local: false,
                reset: false,
            }),
            ast::Set::SetTransaction { modes, snapshot: None, session: _ } => {
                check_transaction_modes(modes)?;
                Ok(Plan::Noop { tag: "SET" })
            }
            other => Err(SqlError::unsupported(format!("{other}"))),
        }
    }
}
