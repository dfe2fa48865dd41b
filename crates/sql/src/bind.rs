//! Binder: sqlparser AST → plan. Resolves names against the engine catalog,
//! infers the types of literals and `$n` parameters from their context (as
//! PostgreSQL does for `unknown`), inserts the implicit casts PostgreSQL
//! would, and rejects what pgtier does not implement with 0A000 naming the
//! construct. Access-path choice is in `planner`.

use std::sync::Arc;

use pgtier_engine::{Catalog, CheckDef, Column, ColumnDef, FkAction, ForeignKeyDef, IndexDef, IndexId, SequenceDefault, SequenceOptions, TableDef, TableSchema};
use pgtier_engine::{DataType, Numeric, Value};
use sqlparser::ast::{self, Ident, ObjectName};

use crate::error::{Result, SqlError};
use crate::expr::{CmpOp, Expr, Func, Subquery, SubqueryKind};
use crate::plan::{
    AggCall, AggFunc, AggPlan, ColumnMask, ConflictAction, DeletePlan, InsertPlan, InsertSource, OnConflict, OutputColumn, Plan, Prepared,
    SelectPlan, SortKey, TxnCommand, UpdatePlan, WindowCall, WindowFunc,
};
use crate::planner::{self, JoinRel};
use crate::value::{self, ArithOp, Category, NUMERIC_ANY, category, type_name};

/// Unresolved type: an untyped literal, NULL or a parameter not yet typed.
pub type Ty = Option<DataType>;

pub fn bind_statement(catalog: &Catalog, stmt: &ast::Statement) -> Result<Prepared> {
    let mut b = Binder { catalog, params: Vec::new(), deps: Vec::new(), indexes: Vec::new(), next_subquery: 0, correlated: false, ctes: Vec::new() };
    let mut plan = b.statement(stmt)?;
    if let Plan::Select(s) = &mut plan {
        crate::system::binder::finish_output(s);
    }
    let param_types = b.params.iter().map(|t| t.unwrap_or(DataType::Text)).collect();
    Ok(Prepared { plan, param_types, deps: b.deps, indexes: b.indexes })
}

pub fn ident(i: &Ident) -> String {
    if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() }
}

fn object_name(name: &ObjectName) -> Result<String> {
    let parts: Vec<String> = name.0.iter().map(|p| p.as_ident().map(ident).ok_or_else(|| SqlError::unsupported(format!("name {name}")))).collect::<Result<_>>()?;
    match parts.as_slice() {
        [n] => Ok(n.clone()),
        [schema, n] if schema == "public" => Ok(n.clone()),
        [schema, _] => Err(SqlError::new("3F000", format!("schema \"{schema}\" does not exist"))),
        _ => Err(SqlError::unsupported(format!("name {name}"))),
    }
}

#[derive(Clone)]
pub struct Rel {
    pub name: String,
    pub table: Arc<TableSchema>,
    pub offset: usize,
    /// Rows not stored in the engine (system catalog, subquery, table function).
    pub source: Option<Arc<crate::plan::VirtualSource>>,
}

#[derive(Default)]
pub struct Scope<'p> {
    pub rels: Vec<Rel>,
    /// Joined-row positions `*` skips (the right side of JOIN ... USING).
    pub hidden: Vec<usize>,
    pub outer: Option<&'p Scope<'p>>,
}

impl Scope<'_> {
    fn width(&self) -> usize {
        self.rels.last().map_or(0, |r| r.offset + r.table.columns.len())
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
    pub(crate) params: Vec<Ty>,
    pub(crate) deps: Vec<Arc<TableSchema>>,
    pub(crate) indexes: Vec<IndexId>,
    pub(crate) next_subquery: usize,
    /// Set when a name resolved to the enclosing query (correlation).
    pub(crate) correlated: bool,
    /// WITH queries in scope, outermost first (a name finds the innermost).
    pub(crate) ctes: Vec<CteDef>,
}

/// A WITH query. Each reference binds its query again, as a subquery in
/// FROM would be (PostgreSQL inlines such a query when it is referenced
/// once; when it is referenced more often the two agree unless it calls a
/// volatile function, which is refused then).
pub(crate) struct CteDef {
    pub(crate) name: String,
    pub(crate) cte: ast::Cte,
    pub(crate) uses: usize,
}

impl<'c> Binder<'c> {
    fn table(&mut self, name: &ObjectName) -> Result<Arc<TableSchema>> {
        if let Some(rel) = crate::system::binder::system_relation(name)? {
            return Err(SqlError::new("42501", format!("permission denied for table {}", rel.def().name)));
        }
        let n = object_name(name)?;
        let t = self.catalog.table_by_name(&n).cloned().ok_or_else(|| SqlError::undefined_table(&n).at(sqlparser::ast::Spanned::span(name)))?;
        if !self.deps.iter().any(|d| Arc::ptr_eq(d, &t)) {
            self.deps.push(t.clone());
        }
        Ok(t)
    }

    fn statement(&mut self, stmt: &ast::Statement) -> Result<Plan> {
        use ast::Statement as S;
        match stmt {
            S::Query(q) => Ok(Plan::Select(self.query(q, None)?)),
            S::Insert(i) => self.insert(i),
            S::Update(u) => self.update(u),
            S::Delete(d) => self.delete(d),
            S::CreateTable(c) => self.create_table(c),
            S::CreateIndex(c) => self.create_index(c),
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
                Ok(Plan::CreateSequence { name: object_name(name)?, options, if_not_exists: *if_not_exists })
            }
            S::Drop { object_type, if_exists, names, cascade: _, restrict: _, purge: _, temporary: _, table: _ } => {
                let names = names.iter().map(object_name).collect::<Result<Vec<_>>>()?;
                match object_type {
                    ast::ObjectType::Table => Ok(Plan::DropTable { names, if_exists: *if_exists, sequences: false }),
                    ast::ObjectType::Sequence => Ok(Plan::DropTable { names, if_exists: *if_exists, sequences: true }),
                    ast::ObjectType::Index => Ok(Plan::DropIndex { names, if_exists: *if_exists }),
                    other => Err(SqlError::unsupported(format!("DROP {other}"))),
                }
            }
            S::StartTransaction { modes, .. } => {
                check_transaction_modes(modes)?;
                Ok(Plan::Txn(TxnCommand::Begin))
            }
            S::Commit { chain: false, .. } => Ok(Plan::Txn(TxnCommand::Commit)),
            S::Rollback { chain: false, savepoint: None } => Ok(Plan::Txn(TxnCommand::Rollback)),
            S::Rollback { savepoint: Some(_), .. } | S::Savepoint { .. } | S::ReleaseSavepoint { .. } => Err(SqlError::unsupported("SAVEPOINT")),
            S::Set(set) => self.set(set),
            S::ShowVariable { variable } => {
                let name = variable.iter().map(|i| i.value.to_lowercase()).collect::<Vec<_>>().join(" ");
                Ok(Plan::Show { name })
            }
            other => Err(SqlError::unsupported(statement_kind(other))),
        }
    }

    fn set(&mut self, set: &ast::Set) -> Result<Plan> {
        match set {
            ast::Set::SingleAssignment { scope: _, hivevar: false, variable, values } => {
                // `SET "application_name"` names the same setting as `SET application_name`.
                let name = variable.0.iter().map(|p| p.as_ident().map_or_else(|| p.to_string().to_lowercase(), ident)).collect::<Vec<_>>().join(".");
                let value = values.iter().map(setting_text).collect::<Vec<_>>().join(", ");
                Ok(Plan::Set { name, value })
            }
            ast::Set::SetTimeZone { local: _, value } => Ok(Plan::Set { name: "timezone".into(), value: setting_text(value) }),
            ast::Set::SetNames { charset_name, .. } => Ok(Plan::Set { name: "client_encoding".into(), value: charset_name.value.clone() }),
            ast::Set::SetTransaction { modes, snapshot: None, session: _ } => {
                check_transaction_modes(modes)?;
                Ok(Plan::Noop { tag: "SET" })
            }
            other => Err(SqlError::unsupported(format!("{other}"))),
        }
    }

    // ------------------------------------------------------------ DDL

    fn create_table(&mut self, c: &ast::CreateTable) -> Result<Plan> {
        if c.temporary {
            return Err(SqlError::unsupported("CREATE TEMPORARY TABLE"));
        }
        if c.query.is_some() {
            return Err(SqlError::unsupported("CREATE TABLE AS"));
        }
        if c.like.is_some() || c.clone.is_some() || c.inherits.is_some() || c.partition_of.is_some() || c.partition_by.is_some() {
            return Err(SqlError::unsupported("CREATE TABLE with LIKE/INHERITS/PARTITION"));
        }
        let name = object_name(&c.name)?;
        let mut def = TableDef::new(name.clone(), Vec::new(), &[]);
        let mut sequences: Vec<(String, SequenceOptions)> = Vec::new();
        let mut pending_checks: Vec<(Option<String>, ast::Expr)> = Vec::new();
        // PostgreSQL's name for a column's own sequence, made unique among
        // the relations that exist and those this statement makes.
        let sequence_name = |catalog: &Catalog, sequences: &[(String, SequenceOptions)], column: &str| {
            let base = format!("{name}_{column}_seq");
            let taken = |n: &str| catalog.table_by_name(n).is_some() || catalog.index_by_name(n).is_some() || sequences.iter().any(|(s, _)| s == n) || n == name;
            (0..).map(|k| if k == 0 { base.clone() } else { format!("{base}{k}") }).find(|n| !taken(n)).unwrap_or(base)
        };
        for col in &c.columns {
            let cname = ident(&col.name);
            let serial = serial_type(&col.data_type);
            let ty = match serial {
                Some(t) => t,
                None => map_type(&col.data_type)?,
            };
            let mut cd = ColumnDef::new(cname.clone(), ty);
            if let Some(t) = serial {
                let seq = sequence_name(self.catalog, &sequences, &cname);
                sequences.push((seq.clone(), SequenceOptions::new(t, 1, None, None, None, false)?));
                cd.nullable = false;
                cd.sequence = Some((seq, SequenceDefault::Serial));
            }
            for opt in &col.options {
                match &opt.option {
                    ast::ColumnOption::Null if cd.sequence.is_some() => {
                        return Err(SqlError::syntax(format!("conflicting NULL/NOT NULL declarations for column \"{cname}\" of table \"{name}\"")));
                    }
                    ast::ColumnOption::Null => cd.nullable = true,
                    ast::ColumnOption::NotNull => cd.nullable = false,
                    ast::ColumnOption::Default(_) if cd.sequence.is_some() => {
                        return Err(SqlError::syntax(format!("multiple default values specified for column \"{cname}\" of table \"{name}\"")));
                    }
                    ast::ColumnOption::Default(e) => match (nextval_default(e), now_default(e, ty)) {
                        (Some(seq), _) => cd.sequence = Some((seq, SequenceDefault::Nextval)),
                        (None, Some(text)) => cd.default_sql = Some(text.to_owned()),
                        (None, None) => cd.default = Some(self.constant_default(e, ty, &cname)?),
                    },
                    ast::ColumnOption::Generated { generated_as, sequence_options, generation_expr: None, .. } => {
                        let how = match generated_as {
                            ast::GeneratedAs::Always => SequenceDefault::IdentityAlways,
                            ast::GeneratedAs::ByDefault => SequenceDefault::IdentityByDefault,
                            ast::GeneratedAs::ExpStored => return Err(SqlError::unsupported("generated columns")),
                        };
                        if cd.sequence.is_some() || cd.default.is_some() {
                            return Err(SqlError::syntax(format!("multiple identity specifications for column \"{cname}\" of table \"{name}\"")));
                        }
                        if !matches!(ty, DataType::Int2 | DataType::Int4 | DataType::Int8) {
                            return Err(SqlError::new("22023", "identity column type must be smallint, integer, or bigint"));
                        }
                        let seq = sequence_name(self.catalog, &sequences, &cname);
                        sequences.push((seq.clone(), self.sequence_options(ty, sequence_options.as_deref().unwrap_or(&[]))?));
                        cd.nullable = false;
                        cd.sequence = Some((seq, how));
                    }
                    ast::ColumnOption::Generated { .. } => return Err(SqlError::unsupported("generated columns")),
                    ast::ColumnOption::PrimaryKey(_) => {
                        if !def.primary_key.is_empty() {
                            return Err(multiple_pk(&name));
                        }
                        def.primary_key = vec![cname.clone()];
                    }
                    ast::ColumnOption::Unique(u) => def.unique.push((u.name.as_ref().map(ident), vec![cname.clone()])),
                    ast::ColumnOption::ForeignKey(fk) => def.foreign_keys.push(self.foreign_key(fk, vec![cname.clone()])?),
                    ast::ColumnOption::Check(c) => pending_checks.push((c.name.as_ref().map(ident), (*c.expr).clone())),
                    other => return Err(SqlError::unsupported(format!("column option {other}"))),
                }
            }
            def.columns.push(cd);
        }
        for constraint in &c.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(pk) => {
                    if !def.primary_key.is_empty() {
                        return Err(multiple_pk(&name));
                    }
                    def.primary_key = index_columns(&pk.columns)?;
                }
                ast::TableConstraint::Unique(u) => def.unique.push((u.name.as_ref().map(ident), index_columns(&u.columns)?)),
                ast::TableConstraint::ForeignKey(fk) => {
                    let cols = fk.columns.iter().map(ident).collect();
                    def.foreign_keys.push(self.foreign_key(fk, cols)?);
                }
                ast::TableConstraint::Check(c) => pending_checks.push((c.name.as_ref().map(ident), (*c.expr).clone())),
                other => return Err(SqlError::unsupported(format!("table constraint {other}"))),
            }
        }
        def.checks = self.name_checks(&def, pending_checks)?;
        Ok(Plan::CreateTable { def, if_not_exists: c.if_not_exists, sequences })
    }

    fn foreign_key(&mut self, fk: &ast::ForeignKeyConstraint, columns: Vec<String>) -> Result<ForeignKeyDef> {
        let restrictive = |a: &Option<ast::ReferentialAction>| matches!(a, None | Some(ast::ReferentialAction::NoAction | ast::ReferentialAction::Restrict));
        if !restrictive(&fk.on_update) {
            return Err(SqlError::unsupported("ON UPDATE actions other than NO ACTION/RESTRICT"));
        }
        let on_delete = match fk.on_delete {
            None | Some(ast::ReferentialAction::NoAction | ast::ReferentialAction::Restrict) => FkAction::NoAction,
            Some(ast::ReferentialAction::Cascade) => FkAction::Cascade,
            Some(ast::ReferentialAction::SetNull) => FkAction::SetNull,
            Some(ast::ReferentialAction::SetDefault) => return Err(SqlError::unsupported("ON DELETE SET DEFAULT")),
        };
        Ok(ForeignKeyDef {
            name: fk.name.as_ref().map(ident),
            columns,
            parent_table: object_name(&fk.foreign_table)?,
            parent_columns: fk.referred_columns.iter().map(ident).collect(),
            on_delete,
        })
    }

    /// TRUNCATE t [, ...] [RESTART IDENTITY | CONTINUE IDENTITY] [RESTRICT].
    /// A table another table's foreign key references may only go with
    /// that table (PostgreSQL's rule without CASCADE).
    fn truncate(&mut self, t: &ast::Truncate) -> Result<Plan> {
        if matches!(t.cascade, Some(ast::CascadeOption::Cascade)) {
            return Err(SqlError::unsupported("TRUNCATE ... CASCADE"));
        }
        if t.partitions.is_some() || t.on_cluster.is_some() || t.if_exists {
            return Err(SqlError::unsupported("this TRUNCATE form"));
        }
        let mut tables: Vec<Arc<TableSchema>> = Vec::new();
        for target in &t.table_names {
            let table = self.table(&target.name)?;
            if table.sequence.is_some() {
                return Err(SqlError::new("42809", format!("\"{}\" is not a table", table.name)));
            }
            if !tables.iter().any(|x| x.id == table.id) {
                tables.push(table);
            }
        }
        for table in &tables {
            for fk in self.catalog.referencing(table.id) {
                if tables.iter().any(|x| x.id == fk.child) {
                    continue;
                }
                let child = self.catalog.table(fk.child).map_or_else(String::new, |c| c.name.clone());
                return Err(SqlError::unsupported("cannot truncate a table referenced in a foreign key constraint")
                    .with_detail(format!("Table \"{child}\" references \"{}\".", table.name))
                    .with_hint(format!("Truncate table \"{child}\" at the same time, or use TRUNCATE ... CASCADE.")));
            }
        }
        // Referencing tables first, so no row is deleted while a row of
        // another truncated table still refers to it.
        let mut ordered: Vec<Arc<TableSchema>> = Vec::with_capacity(tables.len());
        while !tables.is_empty() {
            let pick = tables
                .iter()
                .position(|t| !self.catalog.referencing(t.id).iter().any(|fk| fk.child != t.id && tables.iter().any(|x| x.id == fk.child)))
                .unwrap_or(0);
            ordered.push(tables.remove(pick));
        }
        let restart_identity = matches!(t.identity, Some(ast::TruncateIdentityOption::Restart));
        Ok(Plan::Truncate { tables: ordered, restart_identity })
    }

    /// CHECK constraints of a table being created: each must bind over its
    /// columns as a boolean without subqueries, aggregates or parameters.
    /// Unnamed ones get PostgreSQL's names: `<table>_<column>_check` when
    /// the expression reads one column, else `<table>_check`, with a
    /// number added until the name is free.
    fn name_checks(&mut self, def: &TableDef, pending: Vec<(Option<String>, ast::Expr)>) -> Result<Vec<CheckDef>> {
        let columns: Vec<Column> = def
            .columns
            .iter()
            .map(|c| Column { name: c.name.clone(), ty: c.ty, nullable: c.nullable, default: None, sequence: None, default_sql: None })
            .collect();
        let shape = Arc::new(TableSchema::detached(def.name.clone(), columns));
        let mut out: Vec<CheckDef> = Vec::new();
        for (name, e) in pending {
            let bound = self.check_expr(&shape, &e)?;
            let name = match name {
                Some(n) => n,
                None => {
                    let mut read = Vec::new();
                    bound.walk(&mut |x| {
                        if let Expr::Column(c) = x
                            && !read.contains(c)
                        {
                            read.push(*c);
                        }
                    });
                    let base = match read.as_slice() {
                        [c] => format!("{}_{}_check", def.name, shape.columns[*c].name),
                        _ => format!("{}_check", def.name),
                    };
                    (0..).map(|k| if k == 0 { base.clone() } else { format!("{base}{k}") }).find(|n| !out.iter().any(|c| &c.name == n)).unwrap_or(base)
                }
            };
            out.push(CheckDef { name, sql: e.to_string() });
        }
        Ok(out)
    }

    /// A CHECK expression bound over `table`'s row.
    fn check_expr(&mut self, table: &Arc<TableSchema>, e: &ast::Expr) -> Result<Expr> {
        // Refused before any name in it is looked up, as PostgreSQL does.
        let text = e.to_string();
        let tokens = sqlparser::tokenizer::Tokenizer::new(&sqlparser::dialect::PostgreSqlDialect {}, &text).tokenize().unwrap_or_default();
        if tokens.iter().any(|t| matches!(t, sqlparser::tokenizer::Token::Word(w) if w.keyword == sqlparser::keywords::Keyword::SELECT)) {
            return Err(SqlError::unsupported("cannot use subquery in check constraint"));
        }
        let scope = Scope { rels: vec![Rel { name: table.name.clone(), table: table.clone(), offset: 0, source: None }], hidden: Vec::new(), outer: None };
        let params_before = self.params.len();
        let (b, t) = self.expr(e, &scope, &mut ExprCtx::plain("check constraints"))?;
        if b.has_subquery() {
            return Err(SqlError::unsupported("subqueries and nextval() in check constraints"));
        }
        if self.params.len() != params_before {
            return Err(SqlError::new("42P02", "there is no parameter $1"));
        }
        match t {
            Some(DataType::Bool) => Ok(b),
            None => self.coerce(b, None, DataType::Bool, "CHECK"),
            Some(other) => Err(SqlError::datatype_mismatch(format!("argument of CHECK must be type boolean, not type {}", type_name(other)))),
        }
    }

    /// The CHECK constraints an INSERT or UPDATE of `table` enforces, bound
    /// over its row (in name order, as PostgreSQL checks them).
    fn table_checks(&mut self, table: &Arc<TableSchema>) -> Result<Vec<(String, Expr)>> {
        let mut out = Vec::with_capacity(table.checks.len());
        for c in &table.checks {
            let e = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {}).try_with_sql(&c.sql).and_then(|mut p| p.parse_expr())?;
            out.push((c.name.clone(), self.check_expr(table, &e)?));
        }
        Ok(out)
    }

    /// CREATE SEQUENCE's (or an identity column's) options, resolved with
    /// PostgreSQL's defaults for a sequence of type `ty`.
    fn sequence_options(&mut self, ty: DataType, options: &[ast::SequenceOptions]) -> Result<SequenceOptions> {
        let (mut increment, mut min, mut max, mut start, mut cycle) = (1, None, None, None, false);
        for o in options {
            match o {
                ast::SequenceOptions::IncrementBy(e, _) => increment = self.constant_int(e, "INCREMENT")?,
                ast::SequenceOptions::MinValue(e) => min = e.as_ref().map(|e| self.constant_int(e, "MINVALUE")).transpose()?,
                ast::SequenceOptions::MaxValue(e) => max = e.as_ref().map(|e| self.constant_int(e, "MAXVALUE")).transpose()?,
                ast::SequenceOptions::StartWith(e, _) => start = Some(self.constant_int(e, "START")?),
                // Every value is logged as it is handed out: nothing to cache.
                ast::SequenceOptions::Cache(e) => {
                    if self.constant_int(e, "CACHE")? < 1 {
                        return Err(SqlError::new("22023", "CACHE must be greater than zero"));
                    }
                }
                ast::SequenceOptions::Cycle(no) => cycle = !no,
            }
        }
        Ok(SequenceOptions::new(ty, increment, min, max, start, cycle)?)
    }

    fn constant_int(&mut self, e: &ast::Expr, what: &str) -> Result<i64> {
        let v = self.constant_default(e, DataType::Int8, what)?;
        v.as_i64().ok_or_else(|| SqlError::syntax(format!("{what} must be an integer")))
    }

    fn constant_default(&mut self, e: &ast::Expr, ty: DataType, column: &str) -> Result<Value> {
        let scope = Scope::default();
        let (bound, bty) = self.expr(e, &scope, &mut ExprCtx::plain("DEFAULT expressions"))?;
        let mut constant = true;
        bound.walk(&mut |x| constant &= !matches!(x, Expr::Func(Func::Now, _) | Expr::Param(_) | Expr::Column(_) | Expr::Subquery(_)));
        if !constant {
            return Err(SqlError::unsupported("non-constant DEFAULT"));
        }
        let cast = self.assign(bound, bty, ty, column)?;
        let env = crate::expr::Env { params: &[], now_micros: 0, outer: &[] };
        cast.eval(&env, &mut crate::expr::NoSubqueries, &[])
    }

    fn create_index(&mut self, c: &ast::CreateIndex) -> Result<Plan> {
        if c.predicate.is_some() || !c.include.is_empty() || !c.with.is_empty() || c.concurrently {
            return Err(SqlError::unsupported("CREATE INDEX with INCLUDE/WHERE/WITH/CONCURRENTLY"));
        }
        if let Some(using) = &c.using
            && using.to_string().to_lowercase() != "btree" {
                return Err(SqlError::unsupported(format!("index method {using}")));
            }
        let table = object_name(&c.table_name)?;
        let columns = index_columns(&c.columns)?;
        let name = match &c.name {
            Some(n) => object_name(n)?,
            None => format!("{table}_{}_idx", columns.join("_")),
        };
        Ok(Plan::CreateIndex { def: IndexDef { name, table, columns, unique: c.unique }, if_not_exists: c.if_not_exists })
    }

    // ------------------------------------------------------------ SELECT

    pub(crate) fn query(&mut self, q: &ast::Query, outer: Option<&Scope<'_>>) -> Result<SelectPlan> {
        let Some(with) = &q.with else { return self.query_body(q, outer) };
        if with.recursive {
            return Err(SqlError::unsupported("WITH RECURSIVE"));
        }
        let base = self.ctes.len();
        for cte in &with.cte_tables {
            let name = ident(&cte.alias.name);
            if self.ctes[base..].iter().any(|c| c.name == name) {
                self.ctes.truncate(base);
                return Err(SqlError::new("42712", format!("WITH query name \"{name}\" specified more than once")));
            }
            self.ctes.push(CteDef { name, cte: cte.clone(), uses: 0 });
        }
        let plan = self.query_body(q, outer);
        let defs = self.ctes.split_off(base);
        let plan = plan?;
        for d in defs {
            let text = d.cte.query.to_string().to_lowercase();
            if d.uses > 1 && (text.contains("nextval") || text.contains("setval")) {
                return Err(SqlError::unsupported(format!("WITH query \"{}\" that advances a sequence, referenced more than once", d.name)));
            }
        }
        Ok(plan)
    }

    /// The query apart from its WITH clause.
    fn query_body(&mut self, q: &ast::Query, outer: Option<&Scope<'_>>) -> Result<SelectPlan> {
        if q.fetch.is_some() || q.for_clause.is_some() || q.settings.is_some() || q.format_clause.is_some() || !q.pipe_operators.is_empty() {
            return Err(SqlError::unsupported("FETCH/FOR/SETTINGS clause"));
        }
        let select = match q.body.as_ref() {
            ast::SetExpr::Select(s) => s,
            ast::SetExpr::SetOperation { .. } | ast::SetExpr::Values(_) => return self.set_query(q, outer),
            ast::SetExpr::Query(inner) if q.order_by.is_none() && q.limit_clause.is_none() && q.locks.is_empty() => return self.query(inner, outer),
            _ => return Err(SqlError::unsupported("this query form")),
        };
        self.select(select, q, outer)
    }

    fn bind_from(&mut self, from: &[ast::TableWithJoins], outer: Option<&'_ Scope<'_>>) -> Result<(Vec<Rel>, Vec<JoinSpec>)> {
        let mut rels: Vec<Rel> = Vec::new();
        let mut joins = Vec::new();
        let mut offset = 0;
        let _ = outer;
        let mut add = |b: &mut Self, factor: &ast::TableFactor, rels: &mut Vec<Rel>| -> Result<()> {
            if let Some((rname, table, source)) = b.virtual_from(factor, rels, outer)? {
                if rels.iter().any(|r| r.name == rname) {
                    return Err(SqlError::new("42712", format!("table name \"{rname}\" specified more than once")));
                }
                let width = table.columns.len();
                rels.push(Rel { name: rname, table, offset, source: Some(source) });
                offset += width;
                return Ok(());
            }
            let ast::TableFactor::Table { name, alias, args: None, with_hints, version: None, partitions, sample: None, index_hints, .. } = factor else {
                return Err(SqlError::unsupported(match factor {
                    ast::TableFactor::Derived { .. } => "subquery in FROM".to_owned(),
                    other => format!("FROM item {other}"),
                }));
            };
            if !with_hints.is_empty() || !partitions.is_empty() || !index_hints.is_empty() {
                return Err(SqlError::unsupported("table hints"));
            }
            let table = b.table(name)?;
            let rname = match alias {
                Some(a) if !a.columns.is_empty() => return Err(SqlError::unsupported("column aliases in FROM")),
                Some(a) => ident(&a.name),
                None => table.name.clone(),
            };
            if rels.iter().any(|r| r.name == rname) {
                return Err(SqlError::new("42712", format!("table name \"{rname}\" specified more than once")));
            }
            let width = table.columns.len();
            rels.push(Rel { name: rname, table, offset, source: None });
            offset += width;
            Ok(())
        };
        for twj in from {
            add(self, &twj.relation, &mut rels)?;
            joins.push(JoinSpec { left: false, on: None, using: Vec::new() });
            for j in &twj.joins {
                let (left, constraint) = match &j.join_operator {
                    ast::JoinOperator::Join(c) | ast::JoinOperator::Inner(c) => (false, Some(c)),
                    ast::JoinOperator::Left(c) | ast::JoinOperator::LeftOuter(c) => (true, Some(c)),
                    ast::JoinOperator::CrossJoin(c) => (false, Some(c)),
                    ast::JoinOperator::Right(_) | ast::JoinOperator::RightOuter(_) => return Err(SqlError::unsupported("RIGHT JOIN")),
                    ast::JoinOperator::FullOuter(_) => return Err(SqlError::unsupported("FULL JOIN")),
                    other => return Err(SqlError::unsupported(format!("join {other:?}").chars().take(60).collect::<String>())),
                };
                add(self, &j.relation, &mut rels)?;
                let mut spec = JoinSpec { left, on: None, using: Vec::new() };
                match constraint {
                    Some(ast::JoinConstraint::On(e)) => spec.on = Some(e.clone()),
                    Some(ast::JoinConstraint::Using(cols)) => {
                        spec.using = cols.iter().map(|c| c.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default()).collect();
                    }
                    Some(ast::JoinConstraint::Natural) => return Err(SqlError::unsupported("NATURAL JOIN")),
                    Some(ast::JoinConstraint::None) | None => {}
                }
                joins.push(spec);
            }
        }
        Ok((rels, joins))
    }

    pub(crate) fn select(&mut self, s: &ast::Select, q: &ast::Query, outer: Option<&Scope<'_>>) -> Result<SelectPlan> {
        if s.top.is_some() || s.into.is_some() || !s.lateral_views.is_empty() || s.prewhere.is_some() || !s.cluster_by.is_empty()
            || !s.distribute_by.is_empty() || !s.sort_by.is_empty() || !s.named_window.is_empty() || s.qualify.is_some()
            || !s.connect_by.is_empty()
        {
            return Err(SqlError::unsupported("this SELECT clause"));
        }
        if let Some(rewritten) = crate::system::binder::srf_select(s) {
            return self.select(&rewritten, q, outer);
        }
        let (distinct, distinct_on_items) = match &s.distinct {
            None | Some(ast::Distinct::All) => (false, None),
            Some(ast::Distinct::Distinct) => (true, None),
            Some(ast::Distinct::On(items)) => (false, Some(items)),
        };
        let (rels, joins) = self.bind_from(&s.from, outer)?;
        let mut scope = Scope { rels, hidden: Vec::new(), outer };
        // Join conditions: each sees the relations joined so far.
        let mut join_rels = Vec::new();
        for (level, spec) in joins.iter().enumerate() {
            let mut on = Vec::new();
            if let Some(e) = &spec.on {
                let prefix = Scope { rels: scope.rels[..=level].to_vec(), hidden: Vec::new(), outer: scope.outer };
                let (b, t) = self.expr(e, &prefix, &mut ExprCtx::plain("JOIN conditions"))?;
                on.push(self.boolean(b, t, "JOIN/ON")?);
            }
            for col in &spec.using {
                let right = &scope.rels[level];
                let rc = right.table.column_index(col).ok_or_else(|| {
                    SqlError::new("42703", format!("column \"{col}\" specified in USING clause does not exist in right table"))
                })?;
                let left = scope.rels[..level].iter().find_map(|r| r.table.column_index(col).map(|c| r.offset + c)).ok_or_else(|| {
                    SqlError::new("42703", format!("column \"{col}\" specified in USING clause does not exist in left table"))
                })?;
                on.push(Expr::Cmp(CmpOp::Eq, Expr::Column(left).boxed(), Expr::Column(right.offset + rc).boxed()));
                scope.hidden.push(right.offset + rc);
            }
            join_rels.push(JoinRel { left: spec.left, on });
        }
        let mut where_conjuncts = Vec::new();
        if let Some(w) = &s.selection {
            let (b, t) = self.expr(w, &scope, &mut ExprCtx::plain("WHERE"))?;
            let b = self.boolean(b, t, "WHERE")?;
            flatten_and(b, &mut where_conjuncts);
        }
        // Projection, with aggregates collected.
        let mut ctx = ExprCtx { aggs: Some(Vec::new()), windows: Some(Vec::new()), clause: "", in_agg: false };
        let mut projection = Vec::new();
        let mut columns = Vec::new();
        let mut item_asts: Vec<Option<&ast::Expr>> = Vec::new();
        for item in &s.projection {
            match item {
                ast::SelectItem::UnnamedExpr(e) => {
                    let (b, t) = self.expr(e, &scope, &mut ctx)?;
                    columns.push(OutputColumn { name: column_label(e), ty: t });
                    projection.push(b);
                    item_asts.push(Some(e));
                }
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    let (b, t) = self.expr(expr, &scope, &mut ctx)?;
                    columns.push(OutputColumn { name: ident(alias), ty: t });
                    projection.push(b);
                    item_asts.push(Some(expr));
                }
                ast::SelectItem::Wildcard(opts) => {
                    check_wildcard(opts)?;
                    if scope.rels.is_empty() {
                        return Err(SqlError::new("42601", "SELECT * with no tables specified is not valid"));
                    }
                    for r in &scope.rels {
                        for (i, c) in r.table.visible_columns().iter().enumerate() {
                            if !scope.hidden.contains(&(r.offset + i)) {
                                projection.push(Expr::Column(r.offset + i));
                                columns.push(OutputColumn { name: c.name.clone(), ty: Some(c.ty) });
                                item_asts.push(None);
                            }
                        }
                    }
                }
                ast::SelectItem::ExprWithAliases { .. } => return Err(SqlError::unsupported("multiple aliases")),
                ast::SelectItem::QualifiedWildcard(kind, opts) => {
                    check_wildcard(opts)?;
                    let ast::SelectItemQualifiedWildcardKind::ObjectName(name) = kind else {
                        return Err(SqlError::unsupported("expression.*"));
                    };
                    let qual = object_name(name)?;
                    let r = scope.rels.iter().find(|r| r.name == qual).ok_or_else(|| missing_from(&qual))?;
                    for (i, c) in r.table.visible_columns().iter().enumerate() {
                        projection.push(Expr::Column(r.offset + i));
                        columns.push(OutputColumn { name: c.name.clone(), ty: Some(c.ty) });
                        item_asts.push(None);
                    }
                }
            }
        }
        // GROUP BY.
        let mut group_by = Vec::new();
        match &s.group_by {
            ast::GroupByExpr::Expressions(exprs, mods) => {
                if !mods.is_empty() {
                    return Err(SqlError::unsupported("GROUP BY modifiers"));
                }
                for e in exprs {
                    let bound = if let Some(pos) = ordinal(e) {
                        let item = pos.checked_sub(1).and_then(|i| item_asts.get(i).copied().flatten()).ok_or_else(|| {
                            SqlError::new("42P10", format!("GROUP BY position {pos} is not in select list"))
                        })?;
                        self.expr(item, &scope, &mut ExprCtx::plain("GROUP BY"))?.0
                    } else {
                        match self.expr(e, &scope, &mut ExprCtx::plain("GROUP BY")) {
                            Ok((b, _)) => b,
                            Err(err) if err.sqlstate == "42703" => {
                                // GROUP BY may name an output column.
                                let name = match e {
                                    ast::Expr::Identifier(i) => ident(i),
                                    _ => return Err(err),
                                };
                                let pos = columns.iter().position(|c| c.name == name).ok_or(err)?;
                                let item = item_asts[pos].ok_or_else(|| SqlError::unsupported("GROUP BY on *"))?;
                                self.expr(item, &scope, &mut ExprCtx::plain("GROUP BY"))?.0
                            }
                            Err(err) => return Err(err),
                        }
                    };
                    group_by.push(bound);
                }
            }
            ast::GroupByExpr::All(_) => return Err(SqlError::unsupported("GROUP BY ALL")),
        }
        let having = match &s.having {
            Some(h) => {
                let windows = ctx.windows.take();
                ctx.clause = "HAVING";
                let bound = self.expr(h, &scope, &mut ctx);
                (ctx.windows, ctx.clause) = (windows, "");
                let (b, t) = bound?;
                Some(self.boolean(b, t, "HAVING")?)
            }
            None => None,
        };
        // ORDER BY.
        let visible = projection.len();
        let mut order_by = Vec::new();
        if let Some(ob) = &q.order_by {
            let ast::OrderByKind::Expressions(items) = &ob.kind else {
                return Err(SqlError::unsupported("ORDER BY ALL"));
            };
            if ob.interpolate.is_some() {
                return Err(SqlError::unsupported("INTERPOLATE"));
            }
            for item in items {
                if item.with_fill.is_some() {
                    return Err(SqlError::unsupported("WITH FILL"));
                }
                let desc = item.options.asc == Some(false);
                let nulls_first = item.options.nulls_first.unwrap_or(desc);
                let column = if let Some(pos) = ordinal(&item.expr) {
                    if pos == 0 || pos > visible {
                        return Err(SqlError::new("42P10", format!("ORDER BY position {pos} is not in select list")));
                    }
                    pos - 1
                } else if let Some(pos) = output_name_match(&item.expr, &columns[..visible]) {
                    pos
                } else {
                    let (b, t) = self.expr(&item.expr, &scope, &mut ctx)?;
                    match projection.iter().position(|p| *p == b) {
                        Some(p) => p,
                        None => {
                            if distinct {
                                return Err(SqlError::new("42P10", "for SELECT DISTINCT, ORDER BY expressions must appear in select list"));
                            }
                            projection.push(b);
                            columns.push(OutputColumn { name: "?column?".into(), ty: t });
                            projection.len() - 1
                        }
                    }
                };
                order_by.push(SortKey { column, desc, nulls_first });
            }
        }
        // DISTINCT ON: its expressions are read like ORDER BY's (positions,
        // output names, expressions) and must lead the ORDER BY.
        let mut distinct_on = Vec::new();
        for e in distinct_on_items.into_iter().flatten() {
            let column = if let Some(pos) = ordinal(e) {
                if pos == 0 || pos > visible {
                    return Err(SqlError::new("42P10", format!("SELECT DISTINCT ON position {pos} is not in select list")));
                }
                pos - 1
            } else if let Some(pos) = output_name_match(e, &columns[..visible]) {
                pos
            } else {
                let (b, t) = self.expr(e, &scope, &mut ctx)?;
                match projection.iter().position(|p| *p == b) {
                    Some(p) => p,
                    None => {
                        projection.push(b);
                        columns.push(OutputColumn { name: "?column?".into(), ty: t });
                        projection.len() - 1
                    }
                }
            };
            if !distinct_on.contains(&column) {
                distinct_on.push(column);
            }
        }
        let mut unmatched = distinct_on.clone();
        for k in &order_by {
            if unmatched.is_empty() {
                break;
            }
            let Some(i) = unmatched.iter().position(|c| *c == k.column) else {
                return Err(SqlError::new("42P10", "SELECT DISTINCT ON expressions must match initial ORDER BY expressions"));
            };
            unmatched.remove(i);
        }
        // Aggregation: rewrite everything above it onto the aggregate row.
        let aggs = ctx.aggs.take().unwrap_or_default();
        let mut windows = ctx.windows.take().unwrap_or_default();
        let agg = if !aggs.is_empty() || !group_by.is_empty() || having.is_some() {
            let rewrite = |e: Expr| rewrite_post_agg(e, &group_by, &scope);
            let projection2 = projection.into_iter().map(rewrite).collect::<Result<Vec<_>>>()?;
            projection = projection2;
            for w in &mut windows {
                let partition = std::mem::take(&mut w.partition).into_iter().map(rewrite).collect::<Result<Vec<_>>>()?;
                w.partition = partition;
                let order = std::mem::take(&mut w.order).into_iter().map(|(e, d, n)| rewrite(e).map(|e| (e, d, n))).collect::<Result<Vec<_>>>()?;
                w.order = order;
                match &mut w.func {
                    WindowFunc::Agg(call) => {
                        call.arg = call.arg.take().map(rewrite).transpose()?;
                        call.filter = call.filter.take().map(rewrite).transpose()?;
                    }
                    WindowFunc::Ntile(e) | WindowFunc::FirstValue(e) | WindowFunc::LastValue(e) => *e = rewrite(std::mem::replace(e, Expr::Const(Value::Null)))?,
                    WindowFunc::Shift { value, offset, default, .. } => {
                        *value = rewrite(std::mem::replace(value, Expr::Const(Value::Null)))?;
                        *offset = offset.take().map(rewrite).transpose()?;
                        *default = default.take().map(rewrite).transpose()?;
                    }
                    WindowFunc::RowNumber | WindowFunc::Rank | WindowFunc::DenseRank | WindowFunc::PercentRank | WindowFunc::CumeDist => {}
                }
            }
            let having = having.map(rewrite).transpose()?;
            Some(AggPlan { group_by, aggs, having })
        } else {
            None
        };
        // Window values follow the input row's own columns.
        if !windows.is_empty() {
            let input_width = match &agg {
                Some(a) => a.group_by.len() + a.aggs.len(),
                None => scope.width(),
            };
            let to_column = |e: Expr| resolve_window_refs(e, input_width);
            projection = projection.into_iter().map(to_column).collect::<Result<Vec<_>>>()?;
        }
        let limit_offset = self.limit_offset(q)?;
        if !windows.is_empty() && !q.locks.is_empty() {
            return Err(SqlError::new("0A000", "FOR UPDATE is not allowed with window functions"));
        }
        let for_update = self.locks(q, &scope, agg.is_some() || distinct || !distinct_on.is_empty())?;
        let levels = planner::plan_levels(self.catalog, &scope.rels, join_rels, where_conjuncts.clone(), &mut self.indexes)?;
        let (levels, final_filters) = levels;
        Ok(SelectPlan {
            levels,
            width: scope.width(),
            final_filters,
            agg,
            windows,
            projection,
            visible,
            distinct,
            distinct_on,
            order_by,
            limit: limit_offset.0,
            offset: limit_offset.1,
            for_update,
            columns,
            point_lookup: false,
            projects_columns: false,
            level_masks: Vec::new(),
        }
        .decide_point_lookup())
    }

    pub(crate) fn limit_offset(&mut self, q: &ast::Query) -> Result<(Option<Expr>, Option<Expr>)> {
        let scope = Scope::default();
        let bind = |b: &mut Self, e: &ast::Expr, what: &'static str| -> Result<Option<Expr>> {
            if matches!(e, ast::Expr::Value(v) if matches!(v.value, ast::Value::Null)) {
                return Ok(None);
            }
            let (x, t) = b.expr(e, &scope, &mut ExprCtx::plain(what))?;
            Ok(Some(b.coerce(x, t, DataType::Int8, what)?))
        };
        match &q.limit_clause {
            None => Ok((None, None)),
            Some(ast::LimitClause::LimitOffset { limit, offset, limit_by }) => {
                if !limit_by.is_empty() {
                    return Err(SqlError::unsupported("LIMIT BY"));
                }
                let l = match limit {
                    Some(e) => bind(self, e, "LIMIT")?,
                    None => None,
                };
                let o = match offset {
                    Some(o) => bind(self, &o.value, "OFFSET")?,
                    None => None,
                };
                Ok((l, o))
            }
            Some(ast::LimitClause::OffsetCommaLimit { .. }) => Err(SqlError::unsupported("LIMIT offset, count")),
        }
    }

    fn locks(&mut self, q: &ast::Query, scope: &Scope<'_>, aggregated: bool) -> Result<bool> {
        if q.locks.is_empty() {
            return Ok(false);
        }
        for l in &q.locks {
            if l.nonblock.is_some() {
                return Err(SqlError::unsupported("NOWAIT / SKIP LOCKED"));
            }
            if !matches!(l.lock_type, ast::LockType::Update) {
                return Err(SqlError::unsupported(format!("FOR {}", l.lock_type)));
            }
        }
        if aggregated {
            return Err(SqlError::new("0A000", "FOR UPDATE is not allowed with aggregate functions"));
        }
        if scope.rels.len() != 1 {
            return Err(SqlError::unsupported("SELECT FOR UPDATE over more than one table"));
        }
        if scope.rels[0].source.is_some() {
            return Err(SqlError::unsupported("FOR UPDATE on a system catalog, subquery or function"));
        }
        Ok(true)
    }

    // ------------------------------------------------------------ DML

    fn insert(&mut self, i: &ast::Insert) -> Result<Plan> {
        if i.or.is_some() || i.ignore || i.overwrite || i.partitioned.is_some() || !i.after_columns.is_empty() || i.replace_into || i.table_alias.is_some() {
            return Err(SqlError::unsupported("this INSERT form"));
        }
        let ast::TableObject::TableName(tname) = &i.table else {
            return Err(SqlError::unsupported("INSERT INTO a function"));
        };
        let table = self.table(tname)?;
        writable(&table)?;
        let targets: Vec<usize> = if i.columns.is_empty() {
            (0..table.visible_columns().len()).collect()
        } else {
            i.columns
                .iter()
                .map(|c| {
                    let n = c.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default();
                    table.column_index(&n).ok_or_else(|| {
                        SqlError::new("42703", format!("column \"{n}\" of relation \"{}\" does not exist", table.name))
                    })
                })
                .collect::<Result<_>>()?
        };
        for (k, t) in targets.iter().enumerate() {
            system_column_guard(&table.columns[*t])?;
            if targets[..k].contains(t) {
                return Err(SqlError::new("42701", format!("column \"{}\" specified more than once", table.columns[*t].name)));
            }
        }
        let source = match &i.source {
            None => InsertSource::Values(vec![Vec::new()]).with_defaults(&table, &targets, true)?,
            Some(q) => match q.body.as_ref() {
                ast::SetExpr::Values(values) if q.order_by.is_none() && q.limit_clause.is_none() => {
                    let scope = Scope::default();
                    let mut rows = Vec::new();
                    for row in &values.rows {
                        if row.len() > targets.len() {
                            return Err(SqlError::syntax("INSERT has more expressions than target columns"));
                        }
                        if row.len() < targets.len() && !i.columns.is_empty() {
                            return Err(SqlError::syntax("INSERT has more target columns than expressions"));
                        }
                        let mut out = Vec::new();
                        for (k, e) in row.iter().enumerate() {
                            let col = &table.columns[targets[k]];
                            if is_default_keyword(e) {
                                out.push(column_default(col)?);
                                continue;
                            }
                            always_identity_guard(col)?;
                            let (b, t) = self.expr(e, &scope, &mut ExprCtx::plain("VALUES"))?;
                            out.push(self.assign(b, t, col.ty, &col.name)?);
                        }
                        // Trailing target columns without a value get their default.
                        for &t in &targets[row.len()..] {
                            out.push(column_default(&table.columns[t])?);
                        }
                        rows.push(out);
                    }
                    InsertSource::Values(rows)
                }
                _ => {
                    let sub = self.query(q, None)?;
                    if sub.visible > targets.len() {
                        return Err(SqlError::syntax("INSERT has more expressions than target columns"));
                    }
                    for (k, c) in sub.columns[..sub.visible].iter().enumerate() {
                        let col = &table.columns[targets[k]];
                        always_identity_guard(col)?;
                        if let Some(t) = c.ty {
                            check_assignable(t, col.ty, &col.name)?;
                        }
                    }
                    InsertSource::Query(Box::new(sub))
                }
            },
        };
        let on_conflict = match &i.on {
            None => None,
            Some(ast::OnInsert::OnConflict(oc)) => Some(self.on_conflict(oc, &table)?),
            Some(_) => return Err(SqlError::unsupported("ON DUPLICATE KEY UPDATE")),
        };
        let (returning, columns) = self.returning(i.returning.as_deref(), &table)?;
        let generated = (0..table.columns.len())
            .filter(|c| (table.columns[*c].sequence.is_some() || table.columns[*c].default_sql.is_some()) && !targets.contains(c))
            .map(|c| column_default(&table.columns[c]).map(|e| (c, e)))
            .collect::<Result<_>>()?;
        let checks = self.table_checks(&table)?;
        Ok(Plan::Insert(InsertPlan { table, targets, source, on_conflict, returning, columns, generated, checks }))
    }

    fn on_conflict(&mut self, oc: &ast::OnConflict, table: &Arc<TableSchema>) -> Result<OnConflict> {
        let unique: Vec<Arc<pgtier_engine::IndexSchema>> = self.catalog.indexes_of(table.id).into_iter().filter(|i| i.unique).collect();
        let arbiters: Vec<IndexId> = match &oc.conflict_target {
            None => unique.iter().map(|i| i.id).collect(),
            Some(ast::ConflictTarget::Columns(cols)) => {
                let mut positions = Vec::new();
                for c in cols {
                    let n = ident(c);
                    positions.push(table.column_index(&n).ok_or_else(|| SqlError::new("42703", format!("column \"{n}\" does not exist")))?);
                }
                let mut sorted = positions.clone();
                sorted.sort_unstable();
                let found: Vec<IndexId> = unique
                    .iter()
                    .filter(|i| {
                        let mut c = i.columns.clone();
                        c.sort_unstable();
                        c == sorted
                    })
                    .map(|i| i.id)
                    .collect();
                if found.is_empty() {
                    return Err(SqlError::new("42P10", "there is no unique or exclusion constraint matching the ON CONFLICT specification"));
                }
                found
            }
            Some(ast::ConflictTarget::OnConstraint(name)) => {
                let n = object_name(name)?;
                let idx = unique.iter().find(|i| i.name == n).ok_or_else(|| {
                    SqlError::new("42704", format!("constraint \"{n}\" for table \"{}\" does not exist", table.name))
                })?;
                vec![idx.id]
            }
        };
        self.indexes.extend(arbiters.iter().copied());
        let action = match &oc.action {
            ast::OnConflictAction::DoNothing => ConflictAction::Nothing,
            ast::OnConflictAction::DoUpdate(du) => {
                if oc.conflict_target.is_none() {
                    return Err(SqlError::new("42601", "ON CONFLICT DO UPDATE requires inference specification or constraint name")
                        .with_hint("For example, ON CONFLICT (column_name)."));
                }
                let width = table.columns.len();
                let scope = Scope {
                    rels: vec![
                        Rel { name: table.name.clone(), table: table.clone(), offset: 0, source: None },
                        Rel { name: "excluded".into(), table: table.clone(), offset: width, source: None },
                    ],
                    hidden: Vec::new(),
                    outer: None,
                };
                let assignments = self.assignments(&du.assignments, table, &scope)?;
                let filter = match &du.selection {
                    Some(e) => {
                        let (b, t) = self.expr(e, &scope, &mut ExprCtx::plain("WHERE"))?;
                        Some(self.boolean(b, t, "WHERE")?)
                    }
                    None => None,
                };
                ConflictAction::Update { assignments, filter }
            }
        };
        Ok(OnConflict { arbiters, action })
    }

    fn assignments(&mut self, list: &[ast::Assignment], table: &Arc<TableSchema>, scope: &Scope<'_>) -> Result<Vec<(usize, Expr)>> {
        let mut out: Vec<(usize, Expr)> = Vec::new();
        for a in list {
            let ast::AssignmentTarget::ColumnName(name) = &a.target else {
                return Err(SqlError::unsupported("multiple-column assignment"));
            };
            let n = name.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default();
            let pos = table.column_index(&n).ok_or_else(|| {
                SqlError::new("42703", format!("column \"{n}\" of relation \"{}\" does not exist", table.name))
            })?;
            system_column_guard(&table.columns[pos])?;
            if out.iter().any(|(p, _)| *p == pos) {
                return Err(SqlError::new("42601", format!("multiple assignments to same column \"{n}\"")));
            }
            let col = &table.columns[pos];
            let e = if is_default_keyword(&a.value) {
                column_default(col)?
            } else if col.sequence.is_some_and(|(_, how)| how == SequenceDefault::IdentityAlways) {
                return Err(SqlError::new("428C9", format!("column \"{n}\" can only be updated to DEFAULT"))
                    .with_detail(format!("Column \"{n}\" is an identity column defined as GENERATED ALWAYS.")));
            } else {
                let (b, t) = self.expr(&a.value, scope, &mut ExprCtx::plain("UPDATE"))?;
                self.assign(b, t, col.ty, &col.name)?
            };
            out.push((pos, e));
        }
        Ok(out)
    }

    fn single_table(&mut self, twj: &ast::TableWithJoins) -> Result<Rel> {
        if !twj.joins.is_empty() {
            return Err(SqlError::unsupported("joins in UPDATE/DELETE"));
        }
        let ast::TableFactor::Table { name, alias, .. } = &twj.relation else {
            return Err(SqlError::unsupported("this UPDATE/DELETE target"));
        };
        let table = self.table(name)?;
        let rname = alias.as_ref().map_or_else(|| table.name.clone(), |a| ident(&a.name));
        Ok(Rel { name: rname, table, offset: 0, source: None })
    }

    fn update(&mut self, u: &ast::Update) -> Result<Plan> {
        if u.from.is_some() || u.or.is_some() || !u.order_by.is_empty() || u.limit.is_some() || u.output.is_some() {
            return Err(SqlError::unsupported("UPDATE with FROM/ORDER BY/LIMIT"));
        }
        let rel = self.single_table(&u.table)?;
        let table = rel.table.clone();
        writable(&table)?;
        let scope = Scope { rels: vec![rel], hidden: Vec::new(), outer: None };
        let assignments = self.assignments(&u.assignments, &table, &scope)?;
        let level = self.dml_level(&scope, u.selection.as_ref())?;
        let (returning, columns) = self.returning_in(u.returning.as_deref(), &scope)?;
        let width = table.columns.len();
        let search_columns = ColumnMask::reading(width, &level.filters, &table.primary_key);
        let checks = self.table_checks(&table)?;
        // A CHECK's 23514 detail shows the whole new row.
        let eval_columns = if returning.is_empty() && checks.is_empty() {
            let read = level.filters.iter().chain(&level.key_checks).chain(assignments.iter().map(|(_, e)| e)).chain(checks.iter().map(|(_, e)| e));
            ColumnMask::reading(width, read, &table.primary_key)
        } else {
            ColumnMask::all(width)
        };
        let assignments_have_subqueries = assignments.iter().any(|(_, e)| e.has_subquery());
        let filters_have_subqueries = level.filters.iter().any(Expr::has_subquery);
        Ok(Plan::Update(UpdatePlan { level, search_columns, eval_columns, assignments_have_subqueries, filters_have_subqueries, assignments, returning, columns, checks }))
    }

    fn delete(&mut self, d: &ast::Delete) -> Result<Plan> {
        if d.using.is_some() || !d.order_by.is_empty() || d.limit.is_some() || !d.tables.is_empty() || d.output.is_some() {
            return Err(SqlError::unsupported("DELETE with USING/ORDER BY/LIMIT"));
        }
        let from = match &d.from {
            ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => v,
        };
        let [twj] = from.as_slice() else {
            return Err(SqlError::unsupported("DELETE from several tables"));
        };
        let rel = self.single_table(twj)?;
        writable(&rel.table)?;
        let scope = Scope { rels: vec![rel], hidden: Vec::new(), outer: None };
        let level = self.dml_level(&scope, d.selection.as_ref())?;
        let (returning, columns) = self.returning_in(d.returning.as_deref(), &scope)?;
        let search_columns = ColumnMask::reading(level.width(), &level.filters, &level.table.primary_key);
        Ok(Plan::Delete(DeletePlan { level, search_columns, returning, columns }))
    }

    fn dml_level(&mut self, scope: &Scope<'_>, selection: Option<&ast::Expr>) -> Result<crate::plan::Level> {
        let mut conj = Vec::new();
        if let Some(w) = selection {
            let (b, t) = self.expr(w, scope, &mut ExprCtx::plain("WHERE"))?;
            let b = self.boolean(b, t, "WHERE")?;
            flatten_and(b, &mut conj);
        }
        let (mut levels, finals) = planner::plan_levels(self.catalog, &scope.rels, vec![JoinRel { left: false, on: Vec::new() }], conj, &mut self.indexes)?;
        let mut level = levels.pop().ok_or_else(|| SqlError::new("XX000", "no relation in UPDATE/DELETE"))?;
        // With one table every predicate can be checked on its row.
        level.filters.extend(finals);
        if level.filters.iter().any(Expr::has_subquery) {
            level.exact_key = false;
        }
        Ok(level)
    }

    fn returning(&mut self, items: Option<&[ast::SelectItem]>, table: &Arc<TableSchema>) -> Result<(Vec<Expr>, Vec<OutputColumn>)> {
        let scope = Scope { rels: vec![Rel { name: table.name.clone(), table: table.clone(), offset: 0, source: None }], hidden: Vec::new(), outer: None };
        self.returning_in(items, &scope)
    }

    fn returning_in(&mut self, items: Option<&[ast::SelectItem]>, scope: &Scope<'_>) -> Result<(Vec<Expr>, Vec<OutputColumn>)> {
        let mut exprs = Vec::new();
        let mut cols = Vec::new();
        for item in items.unwrap_or(&[]) {
            match item {
                ast::SelectItem::UnnamedExpr(e) => {
                    let (b, t) = self.expr(e, scope, &mut ExprCtx::plain("RETURNING"))?;
                    exprs.push(b);
                    cols.push(OutputColumn { name: column_label(e), ty: t });
                }
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    let (b, t) = self.expr(expr, scope, &mut ExprCtx::plain("RETURNING"))?;
                    exprs.push(b);
                    cols.push(OutputColumn { name: ident(alias), ty: t });
                }
                ast::SelectItem::ExprWithAliases { .. } => return Err(SqlError::unsupported("multiple aliases")),
                ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                    let r = &scope.rels[0];
                    for (i, c) in r.table.visible_columns().iter().enumerate() {
                        exprs.push(Expr::Column(i));
                        cols.push(OutputColumn { name: c.name.clone(), ty: Some(c.ty) });
                    }
                }
            }
        }
        Ok((exprs, cols))
    }

    // ------------------------------------------------------------ expressions

    fn param(&mut self, text: &str) -> Result<(Expr, Ty)> {
        let n: usize = text.strip_prefix('$').and_then(|d| d.parse().ok()).ok_or_else(|| SqlError::syntax(format!("syntax error at or near \"{text}\"")))?;
        if n == 0 || n > 65_535 {
            return Err(SqlError::new("42P02", format!("there is no parameter ${n}")));
        }
        if self.params.len() < n {
            self.params.resize(n, None);
        }
        Ok((Expr::Param(n - 1), self.params[n - 1]))
    }

    /// Gives an expression of type `from` the type `to` where PostgreSQL
    /// would coerce implicitly (unknown literals, parameters, numeric widening).
    pub(crate) fn coerce(&mut self, e: Expr, from: Ty, to: DataType, what: &str) -> Result<Expr> {
        match (from, &e) {
            (None, Expr::Param(i)) => {
                self.params[*i] = Some(to);
                Ok(e)
            }
            (None, Expr::Const(Value::Text(s))) => Ok(Expr::Const(value::parse_input(s, to)?)),
            (None, Expr::Const(_)) => Ok(e),
            (None, _) => Ok(Expr::Cast(e.boxed(), to, false)),
            (Some(f), _) if f == to => Ok(e),
            (Some(f), _) if category(f) == category(to) || (f == DataType::Date && to == DataType::Timestamp) => {
                if category(f) == Category::String && to == DataType::Text {
                    return Ok(if matches!(f, DataType::Char(_)) { Expr::BpcharTrim(e.boxed()) } else { e });
                }
                Ok(Expr::Cast(e.boxed(), to, false))
            }
            (Some(f), _) => Err(SqlError::datatype_mismatch(format!("argument of {what} must be type {}, not type {}", type_name(to), type_name(f)))),
        }
    }

    /// Assignment to a column: PostgreSQL's assignment casts.
    fn assign(&mut self, e: Expr, from: Ty, to: DataType, column: &str) -> Result<Expr> {
        match from {
            None => match e {
                Expr::Param(i) => {
                    self.params[i] = Some(to);
                    Ok(Expr::Param(i))
                }
                Expr::Const(Value::Text(s)) => Ok(Expr::Const(value::parse_input(&s, to)?)),
                Expr::Const(Value::Null) => Ok(Expr::Const(Value::Null)),
                other => Ok(Expr::Cast(other.boxed(), to, false)),
            },
            Some(f) if f == to => Ok(e),
            Some(f) => {
                check_assignable(f, to, column)?;
                // Fold constants so a bad literal fails at prepare time, like PostgreSQL.
                if let Expr::Const(v) = e {
                    return Ok(Expr::Const(value::cast(v, to, false)?));
                }
                Ok(Expr::Cast(e.boxed(), to, false))
            }
        }
    }

    fn boolean(&mut self, e: Expr, t: Ty, clause: &str) -> Result<Expr> {
        match t {
            Some(DataType::Bool) => Ok(e),
            None => self.coerce(e, None, DataType::Bool, clause),
            Some(other) => Err(SqlError::datatype_mismatch(format!("argument of {clause} must be type boolean, not type {}", type_name(other)))),
        }
    }

    fn resolve_column(&mut self, qualifier: Option<&str>, name: &str, scope: &Scope<'_>) -> Result<(Expr, Ty)> {
        if let Some((pos, ty)) = lookup(scope, qualifier, name)? {
            return Ok((Expr::Column(pos), Some(ty)));
        }
        if let Some(outer) = scope.outer {
            if let Some((pos, ty)) = lookup(outer, qualifier, name)? {
                self.correlated = true;
                return Ok((Expr::Outer(pos), Some(ty)));
            }
            if let Some(o2) = outer.outer
                && lookup(o2, qualifier, name)?.is_some() {
                    return Err(SqlError::unsupported("a subquery referencing a query two levels out"));
                }
        }
        match qualifier {
            Some(q) if !scope.rels.iter().any(|r| r.name == q) && !scope.outer.is_some_and(|o| o.rels.iter().any(|r| r.name == q)) => {
                Err(missing_from(q))
            }
            Some(q) => Err(SqlError::undefined_column(&format!("{q}.{name}"))),
            None => Err(SqlError::undefined_column(&format!("\"{name}\""))),
        }
    }

    pub(crate) fn expr(&mut self, e: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        use ast::Expr as E;
        match e {
            E::Identifier(i) => match self.resolve_column(None, &ident(i), scope) {
                Err(err) if err.sqlstate == "42703" && i.quote_style.is_none() => self.keyword_function(&ident(i))?.ok_or_else(|| err.at(i.span)),
                Err(err) => Err(err.at(i.span)),
                other => other,
            },
            E::CompoundIdentifier(parts) => match parts.as_slice() {
                [q, c] => self.resolve_column(Some(&ident(q)), &ident(c), scope).map_err(|err| err.at(q.span)),
                [s, q, c] if ident(s) == "public" => self.resolve_column(Some(&ident(q)), &ident(c), scope).map_err(|err| err.at(s.span)),
                _ => Err(SqlError::unsupported(format!("name {e}"))),
            },
            E::Value(v) => self.literal(&v.value),
            E::TypedString(ts) => {
                let ty = map_type(&ts.data_type)?;
                let text = match &ts.value.value {
                    ast::Value::SingleQuotedString(s) => s.clone(),
                    other => return Err(SqlError::unsupported(format!("typed literal {other}"))),
                };
                Ok((Expr::Const(value::parse_input(&text, ty)?), Some(ty)))
            }
            E::Nested(inner) => self.expr(inner, scope, ctx),
            E::UnaryOp { op: ast::UnaryOperator::Minus, expr } if matches!(expr.as_ref(), E::Value(v) if matches!(v.value, ast::Value::Number(..))) => {
                // PostgreSQL folds the sign into the literal: -2147483648 is an integer.
                let E::Value(v) = expr.as_ref() else { return Err(SqlError::new("XX000", "literal expected")) };
                let ast::Value::Number(n, long) = &v.value else { return Err(SqlError::new("XX000", "number expected")) };
                self.literal(&ast::Value::Number(format!("-{n}"), *long))
            }
            E::UnaryOp { op, expr } => {
                let (x, t) = self.expr(expr, scope, ctx)?;
                match op {
                    ast::UnaryOperator::Not => Ok((Expr::Not(self.boolean(x, t, "NOT")?.boxed()), Some(DataType::Bool))),
                    ast::UnaryOperator::Minus => {
                        if let (Expr::Const(v), Some(_)) = (&x, t) {
                            return Ok((Expr::Const(value::negate(v)?), t));
                        }
                        match t {
                            Some(ty) if category(ty) == Category::Numeric => Ok((Expr::Neg(x.boxed()), t)),
                            None => {
                                let x = self.coerce(x, None, DataType::Float8, "-")?;
                                Ok((Expr::Neg(x.boxed()), Some(DataType::Float8)))
                            }
                            Some(ty) => Err(SqlError::undefined_operator(&format!("- {}", type_name(ty)))),
                        }
                    }
                    ast::UnaryOperator::Plus => Ok((x, t)),
                    other => Err(SqlError::unsupported(format!("operator {other}"))),
                }
            }
            E::BinaryOp { left, op, right } => match self.regex_op(left, op, right, scope, ctx)? {
                Some(done) => Ok(done),
                None => self.binary(left, op, right, scope, ctx),
            },
            E::AnyOp { left, compare_op, right, .. } => self.sys_any(left, compare_op, right, scope, ctx),
            E::Collate { expr, collation } => self.collate(expr, collation, scope, ctx),
            E::Array(a) => self.array_constructor(&a.elem, scope, ctx),
            E::CompoundFieldAccess { root, access_chain } => self.subscript(root, access_chain, scope, ctx),
            E::IsNull(x) | E::IsNotNull(x) => {
                let (b, _) = self.expr(x, scope, ctx)?;
                Ok((Expr::IsNull(b.boxed(), matches!(e, E::IsNotNull(_))), Some(DataType::Bool)))
            }
            E::IsTrue(x) | E::IsNotTrue(x) | E::IsFalse(x) | E::IsNotFalse(x) => {
                let (b, t) = self.expr(x, scope, ctx)?;
                let b = self.boolean(b, t, "IS TRUE")?;
                let target = matches!(e, E::IsTrue(_) | E::IsNotTrue(_));
                let negated = matches!(e, E::IsNotTrue(_) | E::IsNotFalse(_));
                Ok((Expr::IsBool(b.boxed(), target, negated), Some(DataType::Bool)))
            }
            E::IsDistinctFrom(a, b) | E::IsNotDistinctFrom(a, b) => {
                let (x, y) = self.comparable(a, b, scope, ctx, "IS DISTINCT FROM")?;
                Ok((Expr::IsDistinct(x.boxed(), y.boxed(), matches!(e, E::IsNotDistinctFrom(..))), Some(DataType::Bool)))
            }
            E::Between { expr, negated, low, high } => {
                let (x1, lo) = self.comparable(expr, low, scope, ctx, "BETWEEN")?;
                let (x2, hi) = self.comparable(expr, high, scope, ctx, "BETWEEN")?;
                let both = Expr::And(vec![Expr::Cmp(CmpOp::GtEq, x1.boxed(), lo.boxed()), Expr::Cmp(CmpOp::LtEq, x2.boxed(), hi.boxed())]);
                Ok((if *negated { Expr::Not(both.boxed()) } else { both }, Some(DataType::Bool)))
            }
            E::InList { expr, list, negated } => {
                let (x, xt) = self.expr(expr, scope, ctx)?;
                let mut items = Vec::new();
                let mut types = vec![xt];
                for item in list {
                    let (b, t) = self.expr(item, scope, ctx)?;
                    items.push(b);
                    types.push(t);
                }
                let common = common_type(&types, "IN")?;
                let x = self.coerce_common(x, xt, common)?;
                let mut out = Vec::new();
                for (b, t) in items.into_iter().zip(types.into_iter().skip(1)) {
                    out.push(self.coerce_common(b, t, common)?);
                }
                Ok((Expr::InList { expr: x.boxed(), list: out, negated: *negated }, Some(DataType::Bool)))
            }
            E::Like { negated, any: false, expr, pattern, escape_char: None } | E::ILike { negated, any: false, expr, pattern, escape_char: None } => {
                let (x, xt) = self.expr(expr, scope, ctx)?;
                let (p, pt) = self.expr(pattern, scope, ctx)?;
                let x = self.text_arg(x, xt, "~~")?;
                let p = self.text_arg(p, pt, "~~")?;
                Ok((Expr::Like { expr: x.boxed(), pattern: p.boxed(), negated: *negated, case_insensitive: matches!(e, E::ILike { .. }) }, Some(DataType::Bool)))
            }
            E::Case { operand, conditions, else_result, .. } => self.case(operand.as_deref(), conditions, else_result.as_deref(), scope, ctx),
            E::Cast { kind, expr, data_type, format: None, .. } => {
                if !matches!(kind, ast::CastKind::Cast | ast::CastKind::DoubleColon) {
                    return Err(SqlError::unsupported(format!("{kind:?}")));
                }
                let target = crate::system::binder::cast_target(data_type);
                let ty = match target {
                    Some(_) => DataType::Text,
                    None => map_type(data_type)?,
                };
                if matches!(ty, DataType::Float4 | DataType::Float8)
                    && let Some(f) = wide_numeric_literal(expr)
                {
                    // A literal beyond numeric's 38 digits (-1e300): PostgreSQL
                    // converts numeric to float through its text, as this does.
                    let v = if ty == DataType::Float4 { value::cast(Value::Float8(f), ty, true)? } else { Value::Float8(f) };
                    return Ok((Expr::Const(v), Some(ty)));
                }
                let (x, t) = self.expr(expr, scope, ctx)?;
                if target.is_some() || t.is_some_and(crate::types::is_pseudo) {
                    return self.sys_cast(x, t, target, target.is_none().then_some(ty))?.ok_or_else(|| SqlError::unsupported(format!("cast to {data_type}")));
                }
                match (t, x) {
                    (None, Expr::Const(Value::Text(s))) if category(ty) == Category::String => Ok((Expr::Const(value::cast(Value::Text(s), ty, true)?), Some(ty))),
                    (None, Expr::Const(Value::Text(s))) => Ok((Expr::Const(value::parse_input(&s, ty)?), Some(ty))),
                    (None, Expr::Param(i)) => {
                        self.params[i] = Some(ty);
                        Ok((Expr::Param(i), Some(ty)))
                    }
                    (_, Expr::Const(v)) => Ok((Expr::Const(value::cast(v, ty, true)?), Some(ty))),
                    (_, x) => Ok((Expr::Cast(x.boxed(), ty, true), Some(ty))),
                }
            }
            E::Function(f) => self.function(f, scope, ctx),
            E::Substring { expr, substring_from, substring_for, .. } => {
                let mut args = vec![(**expr).clone()];
                args.push(substring_from.as_deref().cloned().unwrap_or(ast::Expr::value(ast::Value::Number("1".into(), false))));
                if let Some(f) = substring_for {
                    args.push((**f).clone());
                }
                self.scalar_function("substr", &args, scope, ctx)
            }
            E::Trim { expr, trim_where, trim_what, trim_characters: None } => {
                let name = match trim_where {
                    None | Some(ast::TrimWhereField::Both) => "btrim",
                    Some(ast::TrimWhereField::Leading) => "ltrim",
                    Some(ast::TrimWhereField::Trailing) => "rtrim",
                };
                let mut args = vec![(**expr).clone()];
                if let Some(w) = trim_what {
                    args.push((**w).clone());
                }
                self.scalar_function(name, &args, scope, ctx)
            }
            E::Position { expr, r#in } => self.scalar_function("position", &[(**expr).clone(), (**r#in).clone()], scope, ctx),
            E::Ceil { expr, field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime) } => {
                self.scalar_function("ceil", &[(**expr).clone()], scope, ctx)
            }
            E::Floor { expr, field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime) } => {
                self.scalar_function("floor", &[(**expr).clone()], scope, ctx)
            }
            E::Exists { subquery, negated } => {
                let (plan, correlated) = self.subquery(subquery, scope)?;
                Ok((self.sub_expr(SubqueryKind::Exists, *negated, correlated, plan), Some(DataType::Bool)))
            }
            E::Subquery(q) => {
                let (plan, correlated) = self.subquery(q, scope)?;
                if plan.visible != 1 {
                    return Err(SqlError::syntax("subquery must return only one column"));
                }
                let ty = plan.columns[0].ty;
                Ok((self.sub_expr(SubqueryKind::Scalar, false, correlated, plan), ty))
            }
            E::InSubquery { expr, subquery, negated } => {
                let (x, xt) = self.expr(expr, scope, ctx)?;
                let (plan, correlated) = self.subquery(subquery, scope)?;
                if plan.visible != 1 {
                    return Err(SqlError::syntax("subquery has too many columns"));
                }
                let st = plan.columns[0].ty;
                let common = common_type(&[xt, st], "IN")?;
                let x = self.coerce_common(x, xt, common)?;
                if let (Some(c), Some(s)) = (common, st)
                    && category(c) != category(s) {
                        return Err(SqlError::undefined_operator(&format!("{} = {}", type_name(c), type_name(s))));
                    }
                Ok((self.sub_expr(SubqueryKind::In(x.boxed()), *negated, correlated, plan), Some(DataType::Bool)))
            }
            other => Err(SqlError::unsupported(format!("expression {}", truncate(&other.to_string())))),
        }
    }

    pub(crate) fn sub_expr(&mut self, kind: SubqueryKind, negated: bool, correlated: bool, plan: SelectPlan) -> Expr {
        let id = self.next_subquery;
        self.next_subquery += 1;
        Expr::Subquery(Box::new(Subquery { id, kind, negated, correlated, plan: Box::new(plan) }))
    }

    pub(crate) fn subquery(&mut self, q: &ast::Query, scope: &Scope<'_>) -> Result<(SelectPlan, bool)> {
        let saved = std::mem::replace(&mut self.correlated, false);
        let plan = self.query(q, Some(scope));
        let correlated = std::mem::replace(&mut self.correlated, saved);
        Ok((plan?, correlated))
    }

    fn literal(&mut self, v: &ast::Value) -> Result<(Expr, Ty)> {
        use ast::Value as V;
        Ok(match v {
            V::Number(n, _) => {
                if !n.contains(['.', 'e', 'E']) {
                    if let Ok(i) = n.parse::<i32>() {
                        return Ok((Expr::Const(Value::Int4(i)), Some(DataType::Int4)));
                    }
                    if let Ok(i) = n.parse::<i64>() {
                        return Ok((Expr::Const(Value::Int8(i)), Some(DataType::Int8)));
                    }
                }
                let num = value::parse_numeric(n).ok_or_else(|| SqlError::unsupported(format!("numeric literal {n} (more than 38 digits)")))?;
                (Expr::Const(Value::Numeric(num)), Some(NUMERIC_ANY))
            }
            V::SingleQuotedString(s) | V::EscapedStringLiteral(s) => (Expr::Const(Value::Text(s.clone())), None),
            V::Boolean(b) => (Expr::Const(Value::Bool(*b)), Some(DataType::Bool)),
            V::Null => (Expr::Const(Value::Null), None),
            V::Placeholder(p) => self.param(p)?,
            other => return Err(SqlError::unsupported(format!("literal {other}"))),
        })
    }

    pub(crate) fn text_arg(&mut self, e: Expr, t: Ty, op: &str) -> Result<Expr> {
        match t {
            None => self.coerce(e, None, DataType::Text, op),
            Some(DataType::Char(_)) => Ok(Expr::BpcharTrim(e.boxed())),
            Some(ty) if category(ty) == Category::String => Ok(e),
            Some(ty) => Err(SqlError::undefined_operator(&format!("{} {op} unknown", type_name(ty)))),
        }
    }

    fn coerce_common(&mut self, e: Expr, t: Ty, common: Ty) -> Result<Expr> {
        match (t, common) {
            (_, None) => Ok(e),
            (None, Some(c)) => self.coerce(e, None, c, "expression"),
            (Some(DataType::Char(_)), Some(DataType::Text)) => Ok(Expr::BpcharTrim(e.boxed())),
            (Some(a), Some(c)) if a == c || category(a) == Category::String && category(c) == Category::String => Ok(e),
            (Some(a), Some(c)) if category(a) == Category::Numeric && category(c) == Category::Numeric => {
                // Mixed integer/numeric compare exactly at runtime; cast only to floats.
                let widen = (value::is_float(c) && !value::is_float(a)) || (c == NUMERIC_ANY && value::is_integer(a));
                if widen { Ok(Expr::Cast(e.boxed(), c, false)) } else { Ok(e) }
            }
            (Some(_), Some(_)) => Ok(e),
        }
    }

    /// Binds both sides of a comparison with a common type.
    fn comparable(&mut self, a: &ast::Expr, b: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx, op: &str) -> Result<(Expr, Expr)> {
        let (x, xt) = self.expr(a, scope, ctx)?;
        let (y, yt) = self.expr(b, scope, ctx)?;
        self.unify_cmp(x, xt, y, yt, op)
    }

    pub(crate) fn unify_cmp(&mut self, x: Expr, xt: Ty, y: Expr, yt: Ty, op: &str) -> Result<(Expr, Expr)> {
        match (xt, yt) {
            (None, None) => {
                let x = self.coerce(x, None, DataType::Text, op)?;
                let y = self.coerce(y, None, DataType::Text, op)?;
                Ok((x, y))
            }
            (None, Some(t)) => Ok((self.coerce(x, None, t, op)?, y)),
            (Some(t), None) => {
                let y = self.coerce(y, None, t, op)?;
                Ok((x, y))
            }
            (Some(a), Some(b)) => {
                let ca = category(a);
                let cb = category(b);
                let ok = ca == cb || (ca == Category::DateTime && cb == Category::DateTime);
                if !ok {
                    return Err(SqlError::undefined_operator(&format!("{} {op} {}", type_name(a), type_name(b))));
                }
                if ca == Category::String {
                    let both_char = matches!((a, b), (DataType::Char(_), DataType::Char(_)));
                    let trim = |e: Expr, t: DataType| if matches!(t, DataType::Char(_)) && !both_char { Expr::BpcharTrim(e.boxed()) } else { e };
                    let (x, y) = (trim(x, a), trim(y, b));
                    if both_char && a != b {
                        return Ok((Expr::BpcharTrim(x.boxed()), Expr::BpcharTrim(y.boxed())));
                    }
                    return Ok((x, y));
                }
                if ca == Category::Numeric {
                    let common = value::numeric_common(a, b);
                    if value::is_float(common) {
                        let x = if value::is_float(a) { x } else { Expr::Cast(x.boxed(), DataType::Float8, false) };
                        let y = if value::is_float(b) { y } else { Expr::Cast(y.boxed(), DataType::Float8, false) };
                        return Ok((x, y));
                    }
                }
                Ok((x, y))
            }
        }
    }

    fn binary(&mut self, left: &ast::Expr, op: &ast::BinaryOperator, right: &ast::Expr, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        use ast::BinaryOperator as B;
        let cmp = match op {
            B::Eq => Some(CmpOp::Eq),
            B::NotEq => Some(CmpOp::NotEq),
            B::Lt => Some(CmpOp::Lt),
            B::LtEq => Some(CmpOp::LtEq),
            B::Gt => Some(CmpOp::Gt),
            B::GtEq => Some(CmpOp::GtEq),
            _ => None,
        };
        if let Some(c) = cmp {
            let (x, y) = self.comparable(left, right, scope, ctx, c.symbol())?;
            return Ok((Expr::Cmp(c, x.boxed(), y.boxed()), Some(DataType::Bool)));
        }
        let (x, xt) = self.expr(left, scope, ctx)?;
        let (y, yt) = self.expr(right, scope, ctx)?;
        match op {
            B::And | B::Or => {
                let name = if matches!(op, B::And) { "AND" } else { "OR" };
                let x = self.boolean(x, xt, name)?;
                let y = self.boolean(y, yt, name)?;
                let mut parts = Vec::new();
                for e in [x, y] {
                    match (op, e) {
                        (B::And, Expr::And(v)) | (B::Or, Expr::Or(v)) => parts.extend(v),
                        (_, e) => parts.push(e),
                    }
                }
                Ok((if matches!(op, B::And) { Expr::And(parts) } else { Expr::Or(parts) }, Some(DataType::Bool)))
            }
            B::StringConcat => {
                let stringy = |t: Ty| t.is_none_or(|t| category(t) == Category::String);
                if !stringy(xt) && !stringy(yt) {
                    return Err(SqlError::undefined_operator(&format!("{} || {}", type_name(xt.unwrap_or(DataType::Text)), type_name(yt.unwrap_or(DataType::Text)))));
                }
                let x = match xt {
                    None => self.coerce(x, None, DataType::Text, "||")?,
                    Some(DataType::Char(_)) => Expr::BpcharTrim(x.boxed()),
                    _ => x,
                };
                let y = match yt {
                    None => self.coerce(y, None, DataType::Text, "||")?,
                    Some(DataType::Char(_)) => Expr::BpcharTrim(y.boxed()),
                    _ => y,
                };
                Ok((Expr::Concat(x.boxed(), y.boxed()), Some(DataType::Text)))
            }
            B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo => {
                let aop = match op {
                    B::Plus => ArithOp::Add,
                    B::Minus => ArithOp::Sub,
                    B::Multiply => ArithOp::Mul,
                    B::Divide => ArithOp::Div,
                    _ => ArithOp::Mod,
                };
                self.arith(aop, x, xt, y, yt)
            }
            other => Err(SqlError::unsupported(format!("operator {other}"))),
        }
    }

    fn arith(&mut self, op: ArithOp, x: Expr, xt: Ty, y: Expr, yt: Ty) -> Result<(Expr, Ty)> {
        let (x, xt, y, yt) = match (xt, yt) {
            (None, None) => return Err(SqlError::new("42725", format!("operator is not unique: unknown {} unknown", op.symbol()))),
            (None, Some(t)) => {
                let t2 = if t == DataType::Date { DataType::Int4 } else { t };
                (self.coerce(x, None, t2, op.symbol())?, t2, y, t)
            }
            (Some(t), None) => {
                let t2 = if t == DataType::Date && op != ArithOp::Sub { DataType::Int4 } else { t };
                let t2 = if t == DataType::Date && op == ArithOp::Sub { DataType::Int4 } else { t2 };
                let y = self.coerce(y, None, t2, op.symbol())?;
                (x, t, y, t2)
            }
            (Some(a), Some(b)) => (x, a, y, b),
        };
        let bad = || SqlError::undefined_operator(&format!("{} {} {}", type_name(xt), op.symbol(), type_name(yt)));
        let result = match (category(xt), category(yt)) {
            (Category::Numeric, Category::Numeric) => {
                let t = value::numeric_common(xt, yt);
                if op == ArithOp::Mod && value::is_float(t) {
                    return Err(bad());
                }
                t
            }
            (Category::DateTime, Category::Numeric) if xt == DataType::Date && value::is_integer(yt) && matches!(op, ArithOp::Add | ArithOp::Sub) => DataType::Date,
            (Category::Numeric, Category::DateTime) if yt == DataType::Date && value::is_integer(xt) && op == ArithOp::Add => DataType::Date,
            (Category::DateTime, Category::DateTime) if xt == DataType::Date && yt == DataType::Date && op == ArithOp::Sub => {
                return Ok((Expr::Arith(op, x.boxed(), y.boxed(), DataType::Date), Some(DataType::Int4)));
            }
            _ => return Err(bad()),
        };
        // Floats compute in f64 after a cast of the integer/numeric side.
        let (x, y) = if value::is_float(result) {
            let f = |e: Expr, t: DataType| if value::is_float(t) { e } else { Expr::Cast(e.boxed(), DataType::Float8, false) };
            (f(x, xt), f(y, yt))
        } else {
            (x, y)
        };
        if let (Expr::Const(a), Expr::Const(b)) = (&x, &y) {
            return Ok((Expr::Const(value::arith(op, a, b, result)?), Some(result)));
        }
        Ok((Expr::Arith(op, x.boxed(), y.boxed(), result), Some(result)))
    }

    fn case(&mut self, operand: Option<&ast::Expr>, conditions: &[ast::CaseWhen], otherwise: Option<&ast::Expr>, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        let mut whens = Vec::new();
        let mut results = Vec::new();
        let op = match operand {
            Some(o) => Some(self.expr(o, scope, ctx)?),
            None => None,
        };
        let mut op_expr = None;
        for cw in conditions {
            let cond = match &op {
                Some((ox, ot)) => {
                    let (w, wt) = self.expr(&cw.condition, scope, ctx)?;
                    let (o2, w2) = self.unify_cmp(ox.clone(), *ot, w, wt, "=")?;
                    op_expr = Some(o2);
                    w2
                }
                None => {
                    let (w, wt) = self.expr(&cw.condition, scope, ctx)?;
                    self.boolean(w, wt, "CASE/WHEN")?
                }
            };
            whens.push(cond);
            results.push(self.expr(&cw.result, scope, ctx)?);
        }
        let else_bound = match otherwise {
            Some(e) => Some(self.expr(e, scope, ctx)?),
            None => None,
        };
        let mut types: Vec<Ty> = results.iter().map(|r| r.1).collect();
        if let Some((_, t)) = &else_bound {
            types.push(*t);
        }
        let common = common_type(&types, "CASE")?.or(Some(DataType::Text));
        let mut pairs = Vec::new();
        for (w, (r, t)) in whens.into_iter().zip(results) {
            pairs.push((w, self.result_cast(r, t, common)?));
        }
        let otherwise = match else_bound {
            Some((e, t)) => Some(self.result_cast(e, t, common)?.boxed()),
            None => None,
        };
        let operand = match (op, op_expr) {
            (_, Some(o)) => Some(o.boxed()),
            (Some((o, _)), None) => Some(o.boxed()),
            (None, None) => None,
        };
        Ok((Expr::Case { operand, whens: pairs, otherwise }, common))
    }

    /// Casts a branch result to the common type (so output formatting matches).
    pub(crate) fn result_cast(&mut self, e: Expr, t: Ty, common: Ty) -> Result<Expr> {
        match (t, common) {
            (_, None) => Ok(e),
            (None, Some(c)) => self.coerce(e, None, c, "CASE"),
            (Some(a), Some(c)) if a == c => Ok(e),
            (Some(DataType::Char(_)), Some(DataType::Text)) => Ok(Expr::BpcharTrim(e.boxed())),
            (Some(a), Some(c)) if category(a) == Category::String && category(c) == Category::String => Ok(e),
            (Some(_), Some(c)) => Ok(Expr::Cast(e.boxed(), c, false)),
        }
    }

    fn function(&mut self, f: &ast::Function, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        if !f.within_group.is_empty() || f.null_treatment.is_some() || f.parameters != ast::FunctionArguments::None {
            return Err(SqlError::unsupported(format!("function call {}", truncate(&f.to_string()))));
        }
        let name = crate::system::binder::function_name(&f.name)?;
        let (args, distinct, star) = match &f.args {
            ast::FunctionArguments::None => (Vec::new(), false, false),
            ast::FunctionArguments::Subquery(q) if name == "array" => return self.array_subquery(q, scope),
            ast::FunctionArguments::Subquery(_) => return Err(SqlError::unsupported("subquery as function argument")),
            ast::FunctionArguments::List(list) => {
                if !list.clauses.is_empty() {
                    return Err(SqlError::unsupported(format!("clauses in {name}()")));
                }
                let distinct = matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct));
                let mut args = Vec::new();
                let mut star = false;
                for a in &list.args {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => args.push(e.clone()),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        _ => return Err(SqlError::unsupported(format!("argument form in {name}()"))),
                    }
                }
                (args, distinct, star)
            }
        };
        let filter = match &f.filter {
            None => None,
            Some(_) if aggregate_named(&name, star).is_none() => {
                return Err(SqlError::new("42809", format!("FILTER specified, but {name} is not an aggregate function")));
            }
            Some(cond) => {
                let (b, t) = self.expr(cond, scope, &mut ExprCtx::plain("FILTER"))?;
                Some(self.boolean(b, t, "FILTER")?)
            }
        };
        if let Some(over) = &f.over {
            return self.window_function(over, &name, &args, star, distinct, filter, scope, ctx);
        }
        if let Some(func) = aggregate_named(&name, star) {
            return self.aggregate(func, &name, &args, distinct, filter, scope, ctx);
        }
        if star || distinct {
            return Err(SqlError::syntax(format!("{name}(*) or DISTINCT used with a non-aggregate function")));
        }
        self.scalar_function(&name, &args, scope, ctx)
    }

    /// `func(...) OVER (PARTITION BY ... ORDER BY ...)`: row_number, rank,
    /// dense_rank, or an aggregate over the default frame.
    #[allow(clippy::too_many_arguments)]
    fn window_function(
        &mut self, over: &ast::WindowType, name: &str, args: &[ast::Expr], star: bool, distinct: bool, filter: Option<Expr>, scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        if ctx.in_agg {
            return Err(SqlError::new("42803", "aggregate function calls cannot contain window function calls"));
        }
        if ctx.windows.is_none() {
            let clause = if ctx.clause.is_empty() { "this context" } else { ctx.clause };
            return Err(SqlError::new("42P20", format!("window functions are not allowed in {clause}")));
        }
        let ast::WindowType::WindowSpec(spec) = over else {
            return Err(SqlError::unsupported("named windows"));
        };
        if spec.window_name.is_some() {
            return Err(SqlError::unsupported("named windows"));
        }
        if spec.window_frame.is_some() {
            return Err(SqlError::unsupported("window frame clauses (only the default frame)"));
        }
        if distinct {
            return Err(SqlError::unsupported("DISTINCT is not implemented for window functions"));
        }
        // The call's own pieces may hold aggregates but no window function.
        let saved = ctx.windows.take();
        let bound = (|| -> Result<(WindowCall, Ty)> {
            let mut value_type: Ty = None;
            let func = match (name, aggregate_named(name, star)) {
                (_, Some(a)) => WindowFunc::Agg(AggCall { filter: filter.clone(), ..self.agg_call(a, name, args, false, scope, ctx)? }),
                ("row_number" | "rank" | "dense_rank" | "percent_rank" | "cume_dist", None) if args.is_empty() && !star => match name {
                    "row_number" => WindowFunc::RowNumber,
                    "rank" => WindowFunc::Rank,
                    "dense_rank" => WindowFunc::DenseRank,
                    "percent_rank" => WindowFunc::PercentRank,
                    _ => WindowFunc::CumeDist,
                },
                ("ntile", None) if args.len() == 1 => {
                    let (n, t) = self.expr(&args[0], scope, ctx)?;
                    WindowFunc::Ntile(self.coerce(n, t, DataType::Int4, name)?)
                }
                ("lag" | "lead", None) if (1..=3).contains(&args.len()) => {
                    let (value, vt) = self.expr(&args[0], scope, ctx)?;
                    let offset = match args.get(1) {
                        Some(a) => {
                            let (o, t) = self.expr(a, scope, ctx)?;
                            Some(self.coerce(o, t, DataType::Int4, name)?)
                        }
                        None => None,
                    };
                    let default = match args.get(2) {
                        Some(a) => {
                            let (d, t) = self.expr(a, scope, ctx)?;
                            Some(self.result_cast(d, t, vt)?)
                        }
                        None => None,
                    };
                    value_type = vt;
                    WindowFunc::Shift { value, offset, default, lead: name == "lead" }
                }
                ("first_value" | "last_value", None) if args.len() == 1 => {
                    let (value, vt) = self.expr(&args[0], scope, ctx)?;
                    value_type = vt;
                    if name == "first_value" { WindowFunc::FirstValue(value) } else { WindowFunc::LastValue(value) }
                }
                ("row_number" | "rank" | "dense_rank" | "percent_rank" | "cume_dist" | "ntile" | "lag" | "lead" | "first_value" | "last_value", None) => {
                    return Err(SqlError::undefined_function(&format!("{name}(...)")));
                }
                (_, None) => return Err(SqlError::unsupported(format!("window function {name}()"))),
            };
            let mut partition = Vec::new();
            for e in &spec.partition_by {
                partition.push(self.expr(e, scope, ctx)?.0);
            }
            let mut order = Vec::new();
            for item in &spec.order_by {
                let desc = item.options.asc == Some(false);
                order.push((self.expr(&item.expr, scope, ctx)?.0, desc, item.options.nulls_first.unwrap_or(desc)));
            }
            let ty = match &func {
                WindowFunc::Agg(agg) => Some(agg.ty),
                WindowFunc::PercentRank | WindowFunc::CumeDist => Some(DataType::Float8),
                WindowFunc::Ntile(_) => Some(DataType::Int4),
                WindowFunc::Shift { .. } | WindowFunc::FirstValue(_) | WindowFunc::LastValue(_) => value_type,
                WindowFunc::RowNumber | WindowFunc::Rank | WindowFunc::DenseRank => Some(DataType::Int8),
            };
            Ok((WindowCall { func, partition, order }, ty))
        })();
        ctx.windows = saved;
        let (call, ty) = bound?;
        let windows = ctx.windows.as_mut().ok_or_else(|| SqlError::new("XX000", "window context lost"))?;
        windows.push(call);
        Ok((Expr::WindowRef(windows.len() - 1), ty))
    }

    #[allow(clippy::too_many_arguments)]
    fn aggregate(&mut self, func: AggFunc, name: &str, args: &[ast::Expr], distinct: bool, filter: Option<Expr>, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        if ctx.aggs.is_none() {
            return Err(SqlError::new("42803", format!("aggregate functions are not allowed in {}", ctx.clause)));
        }
        let call = AggCall { filter, ..self.agg_call(func, name, args, distinct, scope, ctx)? };
        let aggs = ctx.aggs.as_mut().ok_or_else(|| SqlError::new("XX000", "aggregate context lost"))?;
        let idx = match aggs.iter().position(|c| *c == call) {
            Some(i) => i,
            None => {
                aggs.push(call.clone());
                aggs.len() - 1
            }
        };
        Ok((Expr::AggRef(idx), Some(call.ty)))
    }

    /// An aggregate call's argument and result type.
    fn agg_call(&mut self, func: AggFunc, name: &str, args: &[ast::Expr], distinct: bool, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<AggCall> {
        if ctx.in_agg {
            return Err(SqlError::new("42803", "aggregate function calls cannot be nested"));
        }
        let (arg, ty) = match (func, args) {
            (AggFunc::CountStar, []) => (None, DataType::Int8),
            (AggFunc::StringAgg, [x, delimiter]) => {
                ctx.in_agg = true;
                let bound = self.expr(x, scope, ctx).and_then(|bx| Ok((bx, self.expr(delimiter, scope, ctx)?)));
                ctx.in_agg = false;
                let ((x, xt), (d, dt)) = bound?;
                let x = self.text_arg(x, xt, name).map_err(|_| SqlError::undefined_function(&format!("{name}(...)")))?;
                let d = self.text_arg(d, dt, name).map_err(|_| SqlError::undefined_function(&format!("{name}(...)")))?;
                // Each row carries its value and delimiter as a two-element array.
                (Some(Expr::Func(crate::expr::Func::Sys(crate::expr::SysFunc::MakeArray(crate::types::Elem::Text)), vec![x, d])), DataType::Text)
            }
            (AggFunc::StringAgg, _) => return Err(SqlError::undefined_function(&format!("{name}(...)"))),
            (_, [a]) => {
                ctx.in_agg = true;
                let bound = self.expr(a, scope, ctx);
                ctx.in_agg = false;
                let (x, t) = bound?;
                let t = match t {
                    Some(t) => t,
                    None if func == AggFunc::Count => DataType::Text,
                    None => return Err(SqlError::new("42725", format!("function {name}(unknown) is not unique"))),
                };
                let result = match func {
                    AggFunc::StringAgg => DataType::Text,
                    AggFunc::ArrayAgg => crate::types::Elem::for_element(t)
                        .ok_or_else(|| SqlError::unsupported(format!("array_agg of {}", type_name(t))))?
                        .data_type(),
                    AggFunc::Count | AggFunc::CountStar => DataType::Int8,
                    AggFunc::Sum => match t {
                        DataType::Int2 | DataType::Int4 => DataType::Int8,
                        DataType::Int8 | DataType::Numeric { .. } => NUMERIC_ANY,
                        DataType::Float4 => DataType::Float4,
                        DataType::Float8 => DataType::Float8,
                        other => return Err(SqlError::undefined_function(&format!("{name}({})", type_name(other)))),
                    },
                    AggFunc::Avg => match t {
                        DataType::Int2 | DataType::Int4 | DataType::Int8 | DataType::Numeric { .. } => NUMERIC_ANY,
                        DataType::Float4 | DataType::Float8 => DataType::Float8,
                        other => return Err(SqlError::undefined_function(&format!("{name}({})", type_name(other)))),
                    },
                    AggFunc::Min | AggFunc::Max => match t {
                        DataType::Bool | DataType::Bytea => return Err(SqlError::undefined_function(&format!("{name}({})", type_name(t)))),
                        DataType::Char(_) | DataType::Varchar(_) => DataType::Text,
                        DataType::Numeric { .. } => NUMERIC_ANY,
                        other => other,
                    },
                };
                (Some(x), result)
            }
            _ => return Err(SqlError::undefined_function(&format!("{name}(...)"))),
        };
        Ok(AggCall { func, arg, distinct, filter: None, ty })
    }

    fn scalar_function(&mut self, name: &str, args: &[ast::Expr], scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<(Expr, Ty)> {
        let mut bound = Vec::new();
        for a in args {
            bound.push(self.expr(a, scope, ctx)?);
        }
        let sig_text = {
            let types: Vec<&str> = bound.iter().map(|(_, t)| t.map_or("unknown", type_name)).collect();
            format!("{name}({})", types.join(", "))
        };
        let sig = || sig_text.clone();
        let nargs = bound.len();
        let arity = |lo: usize, hi: usize| -> Result<()> {
            if nargs < lo || nargs > hi { Err(SqlError::undefined_function(&sig())) } else { Ok(()) }
        };
        let text_fn = |f: Func, lo: usize, hi: usize, arg_types: &[DataType], result: DataType, b: &mut Self, bound: Vec<(Expr, Ty)>| -> Result<(Expr, Ty)> {
            arity(lo, hi)?;
            let mut out = Vec::new();
            for (k, (e, t)) in bound.into_iter().enumerate() {
                let want = arg_types.get(k).copied().unwrap_or(DataType::Text);
                let e = if want == DataType::Text {
                    b.text_arg(e, t, name).map_err(|_| SqlError::undefined_function(&sig()))?
                } else {
                    match t {
                        Some(tt) if value::is_integer(tt) => e,
                        None => b.coerce(e, None, want, name)?,
                        Some(_) => return Err(SqlError::undefined_function(&sig())),
                    }
                };
                out.push(e);
            }
            Ok((Expr::Func(f, out), Some(result)))
        };
        use DataType::{Int4, Text};
        match name {
            "lower" => text_fn(Func::Lower, 1, 1, &[Text], Text, self, bound),
            "upper" => text_fn(Func::Upper, 1, 1, &[Text], Text, self, bound),
            "length" | "char_length" | "character_length" => text_fn(Func::Length, 1, 1, &[Text], Int4, self, bound),
            "substr" | "substring" => text_fn(Func::Substr, 2, 3, &[Text, Int4, Int4], Text, self, bound),
            "lpad" => text_fn(Func::Lpad, 2, 3, &[Text, Int4, Text], Text, self, bound),
            "rpad" => text_fn(Func::Rpad, 2, 3, &[Text, Int4, Text], Text, self, bound),
            "btrim" => text_fn(Func::Btrim, 1, 2, &[Text, Text], Text, self, bound),
            "ltrim" => text_fn(Func::Ltrim, 1, 2, &[Text, Text], Text, self, bound),
            "rtrim" => text_fn(Func::Rtrim, 1, 2, &[Text, Text], Text, self, bound),
            "replace" => text_fn(Func::Replace, 3, 3, &[Text, Text, Text], Text, self, bound),
            "position" | "strpos" => {
                let swapped = if name == "strpos" { bound.into_iter().rev().collect() } else { bound };
                text_fn(Func::Position, 2, 2, &[Text, Text], Int4, self, swapped)
            }
            "concat" => {
                let mut out = Vec::new();
                for (e, t) in bound {
                    out.push(match t {
                        None => self.coerce(e, None, Text, name)?,
                        Some(DataType::Char(_)) => Expr::BpcharTrim(e.boxed()),
                        _ => e,
                    });
                }
                Ok((Expr::Func(Func::Concat, out), Some(Text)))
            }
            "now" | "current_timestamp" | "transaction_timestamp" => {
                arity(0, 0)?;
                Ok((Expr::Func(Func::Now, Vec::new()), Some(DataType::TimestampTz)))
            }
            "localtimestamp" => {
                arity(0, 0)?;
                Ok((Expr::Cast(Expr::Func(Func::Now, Vec::new()).boxed(), DataType::Timestamp, false), Some(DataType::Timestamp)))
            }
            "current_date" => {
                arity(0, 0)?;
                Ok((Expr::Cast(Expr::Func(Func::Now, Vec::new()).boxed(), DataType::Date, false), Some(DataType::Date)))
            }
            "abs" => {
                arity(1, 1)?;
                let (e, t) = bound.into_iter().next().ok_or_else(|| SqlError::undefined_function(&sig()))?;
                match t {
                    Some(ty) if category(ty) == Category::Numeric => {
                        let rt = if let DataType::Numeric { .. } = ty { NUMERIC_ANY } else { ty };
                        Ok((Expr::Func(Func::Abs, vec![e]), Some(rt)))
                    }
                    None => {
                        let e = self.coerce(e, None, DataType::Float8, name)?;
                        Ok((Expr::Func(Func::Abs, vec![e]), Some(DataType::Float8)))
                    }
                    Some(_) => Err(SqlError::undefined_function(&sig())),
                }
            }
            "round" | "ceil" | "ceiling" | "floor" => {
                let f = match name {
                    "round" => Func::Round,
                    "floor" => Func::Floor,
                    _ => Func::Ceil,
                };
                arity(1, if f == Func::Round { 2 } else { 1 })?;
                let mut it = bound.into_iter();
                let (e, t) = it.next().ok_or_else(|| SqlError::undefined_function(&sig()))?;
                let digits = it.next();
                let rt = match (t, &digits) {
                    (Some(DataType::Float4 | DataType::Float8) | None, None) => DataType::Float8,
                    (Some(ty), _) if category(ty) == Category::Numeric && !(value::is_float(ty) && digits.is_some()) => NUMERIC_ANY,
                    _ => return Err(SqlError::undefined_function(&sig())),
                };
                let e = match t {
                    None => self.coerce(e, None, rt, name)?,
                    Some(ty) if ty == rt || matches!(ty, DataType::Numeric { .. }) && rt == NUMERIC_ANY => e,
                    Some(_) => Expr::Cast(e.boxed(), rt, false),
                };
                let mut args = vec![e];
                if let Some((d, dt)) = digits {
                    match dt {
                        Some(t) if value::is_integer(t) => args.push(d),
                        None => args.push(self.coerce(d, None, Int4, name)?),
                        Some(_) => return Err(SqlError::undefined_function(&sig())),
                    }
                }
                Ok((Expr::Func(f, args), Some(rt)))
            }
            "mod" => {
                arity(2, 2)?;
                let mut it = bound.into_iter();
                let (Some((x, xt)), Some((y, yt))) = (it.next(), it.next()) else { return Err(SqlError::undefined_function(&sig())) };
                let (e, t) = self.arith(ArithOp::Mod, x, xt, y, yt)?;
                Ok((e, t))
            }
            "coalesce" | "greatest" | "least" => {
                if bound.is_empty() {
                    return Err(SqlError::syntax(format!("syntax error at or near \")\" in {name}()")));
                }
                let types: Vec<Ty> = bound.iter().map(|b| b.1).collect();
                let common = common_type(&types, &name.to_uppercase())?.or(Some(Text));
                let mut out = Vec::new();
                for (e, t) in bound {
                    out.push(self.result_cast(e, t, common)?);
                }
                let e = match name {
                    "coalesce" => Expr::Coalesce(out),
                    "greatest" => Expr::Func(Func::Greatest, out),
                    _ => Expr::Func(Func::Least, out),
                };
                Ok((e, common))
            }
            "nullif" if nargs == 2 => {
                arity(2, 2)?;
                let mut it = bound.into_iter();
                let (Some((x, xt)), Some((y, yt))) = (it.next(), it.next()) else { return Err(SqlError::undefined_function(&sig())) };
                let (x, y) = self.unify_cmp(x, xt, y, yt, "=")?;
                let t = xt.or(yt).or(Some(Text));
                Ok((Expr::NullIf(x.boxed(), y.boxed()), t))
            }
            _ => self.sys_function(name, bound)?.ok_or_else(|| SqlError::undefined_function(&sig())),
        }
    }
}

struct JoinSpec {
    left: bool,
    on: Option<ast::Expr>,
    using: Vec<String>,
}

impl InsertSource {
    fn with_defaults(self, table: &TableSchema, targets: &[usize], all_defaults: bool) -> Result<InsertSource> {
        if !all_defaults {
            return Ok(self);
        }
        let row = targets.iter().map(|&t| column_default(&table.columns[t])).collect::<Result<_>>()?;
        Ok(InsertSource::Values(vec![row]))
    }
}

fn lookup(scope: &Scope<'_>, qualifier: Option<&str>, name: &str) -> Result<Option<(usize, DataType)>> {
    let mut found: Option<(usize, DataType)> = None;
    for r in &scope.rels {
        if qualifier.is_some_and(|q| q != r.name) {
            continue;
        }
        if let Some(c) = r.table.column_index(name) {
            let pos = r.offset + c;
            if found.is_some() && !scope.hidden.contains(&pos) {
                return Err(SqlError::ambiguous_column(name));
            }
            if found.is_none() {
                found = Some((pos, r.table.columns[c].ty));
            }
        }
    }
    Ok(found)
}

/// A numeric literal (optionally negated) too wide for pgtier's 38-digit
/// numeric, as a double; None for anything else or a literal that fits.
fn wide_numeric_literal(e: &ast::Expr) -> Option<f64> {
    match e {
        ast::Expr::UnaryOp { op: ast::UnaryOperator::Minus, expr } => wide_numeric_literal(expr).map(|f| -f),
        ast::Expr::Nested(inner) => wide_numeric_literal(inner),
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) if value::parse_numeric(n).is_none() => n.parse::<f64>().ok().filter(|f| f.is_finite()),
            _ => None,
        },
        _ => None,
    }
}

/// The engine's hidden row id is a system column: readable, never assigned.
fn system_column_guard(col: &pgtier_engine::Column) -> Result<()> {
    if col.is_hidden() {
        return Err(SqlError::new("0A000", format!("cannot assign to system column \"{}\"", col.name)));
    }
    Ok(())
}

fn missing_from(q: &str) -> SqlError {
    SqlError::new("42P01", format!("missing FROM-clause entry for table \"{q}\""))
}

fn multiple_pk(table: &str) -> SqlError {
    SqlError::new("42P16", format!("multiple primary keys for table \"{table}\" are not allowed"))
}

fn flatten_and(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::And(parts) => parts.into_iter().for_each(|p| flatten_and(p, out)),
        other => out.push(other),
    }
}

pub(crate) fn ordinal(e: &ast::Expr) -> Option<usize> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn output_name_match(e: &ast::Expr, columns: &[OutputColumn]) -> Option<usize> {
    let ast::Expr::Identifier(i) = e else { return None };
    let n = ident(i);
    let mut hits = columns.iter().enumerate().filter(|(_, c)| c.name == n);
    let first = hits.next()?.0;
    if hits.next().is_some() { None } else { Some(first) }
}

/// A column's DEFAULT as an expression: its constant, the next value of
/// its sequence (serial, identity, `DEFAULT nextval('s')`), or the
/// transaction's start time (`DEFAULT now()` and its synonyms).
fn column_default(col: &Column) -> Result<Expr> {
    if let Some((seq, _)) = col.sequence {
        let oid = crate::catalog::relation_oid(seq);
        let next = Expr::Func(Func::Sys(crate::expr::SysFunc::Sequence(crate::expr::SeqFunc::Nextval)), vec![Expr::Const(Value::Int8(oid))]);
        return Ok(if col.ty == DataType::Int8 { next } else { Expr::Cast(next.boxed(), col.ty, false) });
    }
    if let Some(sql) = &col.default_sql {
        let known = NOW_DEFAULTS.iter().any(|(_, text)| text == sql);
        return match col.ty {
            DataType::TimestampTz if known => Ok(Expr::Func(Func::Now, Vec::new())),
            DataType::Timestamp if known => Ok(Expr::Cast(Expr::Func(Func::Now, Vec::new()).boxed(), DataType::Timestamp, false)),
            DataType::Date if known => Ok(Expr::Cast(Expr::Func(Func::Now, Vec::new()).boxed(), DataType::Date, false)),
            _ => Err(SqlError::new("XX000", format!("column \"{}\" has a default this version cannot evaluate: {sql}", col.name))),
        };
    }
    Ok(Expr::Const(col.default.clone().unwrap_or(Value::Null)))
}

/// Defaults that are the transaction's start time: (function name, the
/// text PostgreSQL prints for it, which is what the catalog keeps).
const NOW_DEFAULTS: [(&str, &str); 5] = [
    ("now", "now()"),
    ("transaction_timestamp", "transaction_timestamp()"),
    ("current_timestamp", "CURRENT_TIMESTAMP"),
    ("localtimestamp", "LOCALTIMESTAMP"),
    ("current_date", "CURRENT_DATE"),
];

/// `DEFAULT now()` (or a synonym) on a timestamp or date column: the text
/// the catalog keeps for it.
fn now_default(e: &ast::Expr, ty: DataType) -> Option<&'static str> {
    let ast::Expr::Function(f) = e else { return None };
    let empty = match &f.args {
        ast::FunctionArguments::None => true,
        ast::FunctionArguments::List(l) => l.args.is_empty(),
        ast::FunctionArguments::Subquery(_) => false,
    };
    let [part] = f.name.0.as_slice() else { return None };
    let name = part.as_ident()?.value.to_lowercase();
    if !empty || f.over.is_some() || !matches!(ty, DataType::Timestamp | DataType::TimestampTz | DataType::Date) {
        return None;
    }
    NOW_DEFAULTS.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// `DEFAULT nextval('name')` (the name possibly cast to regclass and
/// schema-qualified): the sequence's name.
fn nextval_default(e: &ast::Expr) -> Option<String> {
    let ast::Expr::Function(f) = e else { return None };
    let fname = f.name.0.last().and_then(|p| p.as_ident()).map(ident)?;
    let ast::FunctionArguments::List(list) = &f.args else { return None };
    let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg))] = list.args.as_slice() else { return None };
    let arg = match arg {
        ast::Expr::Cast { expr, .. } => expr.as_ref(),
        other => other,
    };
    let ast::Expr::Value(v) = arg else { return None };
    let ast::Value::SingleQuotedString(name) = &v.value else { return None };
    if fname != "nextval" {
        return None;
    }
    crate::catalog::split_qualified(name).pop().filter(|n| !n.is_empty())
}

/// INSERT, UPDATE and DELETE never change a sequence's row directly.
fn writable(table: &TableSchema) -> Result<()> {
    if table.sequence.is_some() {
        return Err(SqlError::new("42809", format!("cannot change sequence \"{}\"", table.name)));
    }
    Ok(())
}

/// A GENERATED ALWAYS identity column takes only DEFAULT (pgtier has no
/// OVERRIDING SYSTEM VALUE).
fn always_identity_guard(col: &Column) -> Result<()> {
    if col.sequence.is_some_and(|(_, how)| how == SequenceDefault::IdentityAlways) {
        return Err(SqlError::new("428C9", format!("cannot insert a non-DEFAULT value into column \"{}\"", col.name))
            .with_detail(format!("Column \"{}\" is an identity column defined as GENERATED ALWAYS.", col.name))
            .with_hint("Use OVERRIDING SYSTEM VALUE to override."));
    }
    Ok(())
}

fn is_default_keyword(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

fn check_wildcard(opts: &ast::WildcardAdditionalOptions) -> Result<()> {
    if opts.opt_ilike.is_some() || opts.opt_exclude.is_some() || opts.opt_except.is_some() || opts.opt_replace.is_some() || opts.opt_rename.is_some() {
        return Err(SqlError::unsupported("wildcard options"));
    }
    Ok(())
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

fn index_columns(cols: &[ast::IndexColumn]) -> Result<Vec<String>> {
    cols.iter()
        .map(|c| match &c.column.expr {
            ast::Expr::Identifier(i) => Ok(ident(i)),
            other => Err(SqlError::unsupported(format!("index on expression {other}"))),
        })
        .collect()
}

fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

fn statement_kind(s: &ast::Statement) -> String {
    let text = s.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    words.join(" ")
}

/// The name PostgreSQL gives an output column with no alias.
fn column_label(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Identifier(i) => ident(i),
        ast::Expr::CompoundIdentifier(parts) => parts.last().map(ident).unwrap_or_default(),
        ast::Expr::Function(f) => f.name.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default(),
        ast::Expr::Cast { expr, .. } => match expr.as_ref() {
            ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) => column_label(expr),
            _ => "?column?".into(),
        },
        ast::Expr::Nested(inner) => column_label(inner),
        ast::Expr::Case { .. } => "case".into(),
        ast::Expr::Exists { .. } => "exists".into(),
        ast::Expr::Substring { .. } => "substring".into(),
        ast::Expr::Trim { .. } => "btrim".into(),
        _ => "?column?".into(),
    }
}

/// Assignment casts PostgreSQL allows into a column of type `to`.
fn check_assignable(from: DataType, to: DataType, column: &str) -> Result<()> {
    let ok = match (category(from), category(to)) {
        (a, b) if a == b => true,
        // Any type converts to a string type by its text output on assignment.
        (_, Category::String) => true,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(SqlError::datatype_mismatch(format!(
            "column \"{column}\" is of type {} but expression is of type {}",
            value::full_type_name(to),
            type_name(from)
        ))
        .with_hint("You will need to rewrite or cast the expression."))
    }
}

/// Common type of CASE/COALESCE/IN branches (PostgreSQL's
/// select_common_type, for the categories pgtier has).
pub(crate) fn common_type(types: &[Ty], construct: &str) -> Result<Ty> {
    let mut common: Ty = None;
    for t in types.iter().flatten() {
        common = Some(match common {
            None => *t,
            Some(c) if c == *t => c,
            Some(c) => match (category(c), category(*t)) {
                (Category::Numeric, Category::Numeric) => value::numeric_common(c, *t),
                (Category::String, Category::String) => DataType::Text,
                // date < timestamp < timestamptz, PostgreSQL's preference.
                (Category::DateTime, Category::DateTime) if c == DataType::TimestampTz || *t == DataType::TimestampTz => DataType::TimestampTz,
                (Category::DateTime, Category::DateTime) => DataType::Timestamp,
                _ => {
                    return Err(SqlError::datatype_mismatch(format!("{construct} types {} and {} cannot be matched", type_name(c), type_name(*t))));
                }
            },
        });
    }
    Ok(common)
}

/// The aggregate function `name` calls (`count(*)` when `star`).
fn aggregate_named(name: &str, star: bool) -> Option<AggFunc> {
    Some(match name {
        "count" if star => AggFunc::CountStar,
        "count" => AggFunc::Count,
        "sum" => AggFunc::Sum,
        "avg" => AggFunc::Avg,
        "min" => AggFunc::Min,
        "max" => AggFunc::Max,
        "string_agg" => AggFunc::StringAgg,
        "array_agg" => AggFunc::ArrayAgg,
        _ => return None,
    })
}

/// A window function's reference becomes the column the executor appends
/// for it after the input row's `base` columns.
fn resolve_window_refs(e: Expr, base: usize) -> Result<Expr> {
    match e {
        Expr::WindowRef(i) => Ok(Expr::Column(base + i)),
        other => other.map_children(&mut |c| resolve_window_refs(c, base)),
    }
}

/// Maps an aggregated query's expression onto the aggregate row.
fn rewrite_post_agg(e: Expr, groups: &[Expr], scope: &Scope<'_>) -> Result<Expr> {
    if let Some(k) = groups.iter().position(|g| *g == e) {
        return Ok(Expr::Column(k));
    }
    match e {
        Expr::AggRef(j) => Ok(Expr::Column(groups.len() + j)),
        Expr::Column(c) => Err(SqlError::new(
            "42803",
            format!("column \"{}\" must appear in the GROUP BY clause or be used in an aggregate function", scope.column_name(c)),
        )),
        Expr::Subquery(s) if s.correlated => Err(SqlError::unsupported("correlated subquery above GROUP BY")),
        other => other.map_children(&mut |c| rewrite_post_agg(c, groups, scope)),
    }
}

/// `serial`, `bigserial`, `smallserial` (CREATE TABLE only): the integer
/// type the column gets.
fn serial_type(t: &ast::DataType) -> Option<DataType> {
    let ast::DataType::Custom(name, mods) = t else { return None };
    if !mods.is_empty() {
        return None;
    }
    match name.to_string().to_lowercase().trim_start_matches("pg_catalog.") {
        "serial" | "serial4" => Some(DataType::Int4),
        "bigserial" | "serial8" => Some(DataType::Int8),
        "smallserial" | "serial2" => Some(DataType::Int2),
        _ => None,
    }
}

/// SQL type name → engine type.
pub fn map_type(t: &ast::DataType) -> Result<DataType> {
    use ast::DataType as D;
    let len = |l: &Option<ast::CharacterLength>| -> Result<Option<u32>> {
        match l {
            None => Ok(None),
            Some(ast::CharacterLength::IntegerLength { length, .. }) => {
                // Longer lengths are the system catalogs' array tags (system::types).
                u32::try_from(*length).ok().filter(|n| *n <= 10_485_760).map(Some).ok_or_else(|| SqlError::new("22023", "length for type varchar cannot exceed 10485760"))
            }
            Some(ast::CharacterLength::Max) => Err(SqlError::unsupported("varchar(max)")),
        }
    };
    let numeric = |info: &ast::ExactNumberInfo| -> Result<DataType> {
        match info {
            ast::ExactNumberInfo::None => Ok(NUMERIC_ANY),
            ast::ExactNumberInfo::Precision(p) => Ok(DataType::Numeric { precision: narrow(*p)?, scale: 0 }),
            ast::ExactNumberInfo::PrecisionAndScale(p, s) => {
                let s = u64::try_from(*s).map_err(|_| SqlError::unsupported("negative numeric scale"))?;
                Ok(DataType::Numeric { precision: narrow(*p)?, scale: narrow(s)? })
            }
        }
    };
    Ok(match t {
        D::SmallInt(_) | D::Int2(_) => DataType::Int2,
        D::Int(_) | D::Integer(_) | D::Int4(_) => DataType::Int4,
        D::BigInt(_) | D::Int8(_) => DataType::Int8,
        D::Numeric(i) | D::Decimal(i) | D::Dec(i) => numeric(i)?,
        D::Real | D::Float4 => DataType::Float4,
        D::DoublePrecision | D::Float8 | D::Double(ast::ExactNumberInfo::None) => DataType::Float8,
        D::Float(ast::ExactNumberInfo::Precision(p)) if *p <= 24 => DataType::Float4,
        D::Float(_) => DataType::Float8,
        D::Text | D::String(None) => DataType::Text,
        D::Varchar(l) | D::CharacterVarying(l) => match len(l)? {
            Some(n) => DataType::Varchar(n),
            None => DataType::Text,
        },
        D::Char(l) | D::Character(l) => DataType::Char(len(l)?.unwrap_or(1)),
        D::Bool | D::Boolean => DataType::Bool,
        D::Bytea => DataType::Bytea,
        D::Date => DataType::Date,
        D::Timestamp(None, ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) => DataType::Timestamp,
        D::Timestamp(None, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => DataType::TimestampTz,
        // psql and drivers write builtin types qualified (`pg_catalog.text`).
        D::Custom(name, mods) if mods.is_empty() => match name.to_string().to_lowercase().trim_start_matches("pg_catalog.") {
            "int" | "int4" | "integer" => DataType::Int4,
            "int2" | "smallint" => DataType::Int2,
            "int8" | "bigint" => DataType::Int8,
            "float4" | "real" => DataType::Float4,
            "float8" => DataType::Float8,
            "bool" | "boolean" => DataType::Bool,
            "text" | "varchar" => DataType::Text,
            "bytea" => DataType::Bytea,
            "date" => DataType::Date,
            "timestamp" => DataType::Timestamp,
            "timestamptz" => DataType::TimestampTz,
            "bpchar" => DataType::Char(1),
            other => return Err(SqlError::new("42704", format!("type \"{other}\" does not exist"))),
        },
        other => return Err(SqlError::unsupported(format!("type {other}"))),
    })
}

fn narrow(v: u64) -> Result<u8> {
    u8::try_from(v).ok().filter(|p| *p <= crate::value::NUMERIC_PRECISION_MAX).ok_or_else(|| {
        SqlError::unsupported(format!("numeric precision {v} (at most {})", crate::value::NUMERIC_PRECISION_MAX))
    })
}

/// Evaluates a constant numeric for tests.
#[allow(dead_code)]
fn numeric_const(m: i128, s: u8) -> Expr {
    Expr::Const(Value::Numeric(Numeric::new(m, s)))
}
