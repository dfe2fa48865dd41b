//! CREATE TABLE / INDEX / SEQUENCE, TRUNCATE, and the CHECK constraints
//! and column defaults they carry.

use std::sync::Arc;

use pgtier_engine::{
    Catalog, CheckDef, Column, ColumnDef, DataType, FkAction, FkTiming, ForeignKeyDef, IndexDef, IndexKeyOptions,
    IndexOptions, SequenceDefault, SequenceOptions, TableDef, TableSchema, Value,
};
use sqlparser::ast;

use super::{Binder, ExprCtx, Rel, Scope, ident};
use crate::error::{Result, SqlError};
use crate::expr::{Expr, Func};
use crate::plan::{BoundCheck, ColumnSequence, Plan};
use crate::value::type_name;

/// Defaults that are the transaction's start time: (function name, the
/// text PostgreSQL prints for it, which is what the catalog keeps).
pub(super) const NOW_DEFAULTS: [(&str, &str); 5] = [
    ("now", "now()"),
    ("transaction_timestamp", "transaction_timestamp()"),
    ("current_timestamp", "CURRENT_TIMESTAMP"),
    ("localtimestamp", "LOCALTIMESTAMP"),
    ("current_date", "CURRENT_DATE"),
];

impl Binder<'_> {
    pub(crate) fn create_table(&mut self, c: &ast::CreateTable) -> Result<Plan> {
        if let Some(command) = crate::dialect::partition_command(c) {
            return self.partition_command(c, command);
        }
        if c.temporary {
            return self.create_temp_table(c);
        }
        if c.on_commit.is_some() {
            return Err(SqlError::new("42P16", "ON COMMIT can only be used on temporary tables"));
        }
        if let Some(q) = &c.query {
            return self.create_table_as(c, q);
        }
        if let Some(ast::CreateTableLikeKind::Parenthesized(like)) = &c.like {
            return self.create_table_like(c, like);
        }
        if c.like.is_some() || c.clone.is_some() || c.inherits.is_some() {
            return Err(SqlError::unsupported("CREATE TABLE with LIKE/INHERITS"));
        }
        if let Some(of) = &c.partition_of {
            return self.create_partition(c, of);
        }
        let name = self.new_relation_key(&c.name)?;
        // A composite type is a relation in PostgreSQL's pg_class.
        // and a table's row type takes its name, which a domain's holds.
        if let ("public", short) = crate::names::split(&name)
            && let Some(t) = crate::catalog::user_types::user_type_named(self.catalog, short)
        {
            if t.is_domain() {
                return Err(SqlError::new("42710", format!("type \"{short}\" already exists")).with_hint(
                    "A relation has an associated type of the same name, so you must use a name that doesn't conflict with any existing type.",
                ));
            }
            return Err(SqlError::new("42P07", format!("relation \"{short}\" already exists")));
        }
        let mut def = TableDef::new(name.clone(), Vec::new(), &[]);
        let mut sequences: Vec<ColumnSequence> = Vec::new();
        let mut pending_checks: Vec<(Option<String>, ast::Expr)> = Vec::new();
        for col in &c.columns {
            let cd = self.column_def(col, &mut def, &mut sequences, &mut pending_checks)?;
            def.columns.push(cd);
        }
        for constraint in &c.constraints {
            self.table_constraint(constraint, &mut def, &mut pending_checks)?;
        }
        def.checks = self.name_checks(&def, pending_checks, &[])?;
        if let Some(e) = &c.partition_by {
            if self.creating_temp {
                return Err(SqlError::unsupported("temporary partitioned tables"));
            }
            self.partition_by(e, &mut def)?;
        }
        for fk in &def.foreign_keys {
            if self
                .catalog
                .table_by_name(&fk.parent_table)
                .is_some_and(|t| crate::catalog::partitions::is_partitioned(t))
            {
                return Err(SqlError::unsupported("a foreign key referencing a partitioned table"));
            }
        }
        for key in std::iter::once(&def.primary_key).chain(def.unique.iter().map(|(_, cols)| cols)) {
            for col in key {
                if let Some(c) = def.columns.iter().find(|c| c.name == *col) {
                    no_btree_class(c.ty)?;
                }
            }
        }
        if !self.creating_temp
            && def.foreign_keys.iter().any(|fk| crate::names::is_temp_schema(crate::names::split(&fk.parent_table).0))
        {
            return Err(SqlError::new("42P16", "constraints on permanent tables may reference only permanent tables"));
        }
        Ok(Plan::CreateTable { def, if_not_exists: c.if_not_exists, sequences, indexes: Vec::new() })
    }

    /// One column of CREATE TABLE or ALTER TABLE ADD COLUMN, for table
    /// `def`: its definition, plus what it adds to the table (a serial or
    /// identity column's sequence, PRIMARY KEY, UNIQUE, REFERENCES, CHECK).
    pub(super) fn column_def(
        &mut self,
        col: &ast::ColumnDef,
        def: &mut TableDef,
        sequences: &mut Vec<ColumnSequence>,
        pending_checks: &mut Vec<(Option<String>, ast::Expr)>,
    ) -> Result<ColumnDef> {
        let name = def.name.clone();
        // PostgreSQL's name for a column's own sequence, made unique among
        // the relations that exist and those this statement makes.
        let sequence_name = |catalog: &Catalog, sequences: &[ColumnSequence], column: &str| {
            let base = format!("{name}_{column}_seq");
            let taken = |n: &str| {
                catalog.table_by_name(n).is_some()
                    || catalog.index_by_name(n).is_some()
                    || sequences.iter().any(|s| s.name == n)
                    || n == name
            };
            (0..).map(|k| if k == 0 { base.clone() } else { format!("{base}{k}") }).find(|n| !taken(n)).unwrap_or(base)
        };
        let cname = ident(&col.name);
        let serial = serial_type(&col.data_type);
        let ty = match serial {
            Some(t) => t,
            None => self.column_type(&col.data_type)?,
        };
        let mut cd = ColumnDef::new(cname.clone(), ty);
        if let Some(t) = serial {
            let seq = sequence_name(self.catalog, sequences, &cname);
            sequences.push(ColumnSequence {
                name: seq.clone(),
                options: SequenceOptions::new(t, 1, None, None, None, false)?,
            });
            cd.nullable = false;
            cd.sequence = Some((seq, SequenceDefault::Serial));
        }
        for opt in &col.options {
            match &opt.option {
                ast::ColumnOption::Null if cd.sequence.is_some() => {
                    return Err(SqlError::syntax(format!(
                        "conflicting NULL/NOT NULL declarations for column \"{cname}\" of table \"{name}\""
                    )));
                }
                ast::ColumnOption::Null => cd.nullable = true,
                ast::ColumnOption::NotNull => cd.nullable = false,
                ast::ColumnOption::Default(_) if cd.sequence.is_some() => {
                    return Err(SqlError::syntax(format!(
                        "multiple default values specified for column \"{cname}\" of table \"{name}\""
                    )));
                }
                ast::ColumnOption::Default(e) => self.set_column_default(&mut cd, e)?,
                ast::ColumnOption::Generated { generated_as, sequence_options, generation_expr: None, .. } => {
                    let how = match generated_as {
                        ast::GeneratedAs::Always => SequenceDefault::IdentityAlways,
                        ast::GeneratedAs::ByDefault => SequenceDefault::IdentityByDefault,
                        ast::GeneratedAs::ExpStored => return Err(SqlError::unsupported("generated columns")),
                    };
                    if cd.sequence.is_some() || cd.default.is_some() {
                        return Err(SqlError::syntax(format!(
                            "multiple identity specifications for column \"{cname}\" of table \"{name}\""
                        )));
                    }
                    if !matches!(ty, DataType::Int2 | DataType::Int4 | DataType::Int8) {
                        return Err(SqlError::new(
                            "22023",
                            "identity column type must be smallint, integer, or bigint",
                        ));
                    }
                    let seq = sequence_name(self.catalog, sequences, &cname);
                    let options = self.sequence_options(ty, sequence_options.as_deref().unwrap_or(&[]))?;
                    sequences.push(ColumnSequence { name: seq.clone(), options });
                    cd.nullable = false;
                    cd.sequence = Some((seq, how));
                }
                ast::ColumnOption::Generated { .. } => return Err(SqlError::unsupported("generated columns")),
                ast::ColumnOption::PrimaryKey(pk) => {
                    not_deferrable(&pk.characteristics)?;
                    if !def.primary_key.is_empty() {
                        return Err(multiple_pk(&name));
                    }
                    def.primary_key = vec![cname.clone()];
                }
                ast::ColumnOption::Unique(u) => {
                    not_deferrable(&u.characteristics)?;
                    // `CONSTRAINT name` before a column constraint is the
                    // option's name (sqlparser leaves the constraint's own empty).
                    def.unique.push((
                        u.name
                            .as_ref()
                            .or(opt.name.as_ref())
                            .map(|n| crate::names::stored(crate::names::split(&def.name).0, &ident(n))),
                        vec![cname.clone()],
                    ));
                }
                ast::ColumnOption::ForeignKey(fk) => {
                    let mut fk = self.foreign_key(fk, vec![cname.clone()])?;
                    fk.name = fk.name.or_else(|| opt.name.as_ref().map(ident));
                    def.foreign_keys.push(fk);
                }
                ast::ColumnOption::Check(c) => {
                    pending_checks.push((c.name.as_ref().or(opt.name.as_ref()).map(ident), (*c.expr).clone()))
                }
                other => return Err(SqlError::unsupported(format!("column option {other}"))),
            }
        }
        Ok(cd)
    }

    /// `DEFAULT e` of column `cd` (replacing any default it had): a
    /// sequence's `nextval`, a per-row `now()` or `gen_random_uuid()`, or
    /// a constant.
    pub(super) fn set_column_default(&mut self, cd: &mut ColumnDef, e: &ast::Expr) -> Result<()> {
        let (default, sequence, default_sql) =
            match (nextval_default(e), now_default(e, cd.ty).or_else(|| uuid_default(e, cd.ty))) {
                (Some(seq), _) => (None, Some((seq, SequenceDefault::Nextval)), None),
                (None, Some(text)) => (None, None, Some(text.to_owned())),
                (None, None) => (Some(self.constant_default(e, cd.ty, &cd.name.clone())?), None, None),
            };
        (cd.default, cd.sequence, cd.default_sql) = (default, sequence, default_sql);
        Ok(())
    }

    /// A table constraint of CREATE TABLE or ALTER TABLE ADD, added to `def`.
    pub(super) fn table_constraint(
        &mut self,
        constraint: &ast::TableConstraint,
        def: &mut TableDef,
        pending_checks: &mut Vec<(Option<String>, ast::Expr)>,
    ) -> Result<()> {
        match constraint {
            ast::TableConstraint::PrimaryKey(pk) => {
                not_deferrable(&pk.characteristics)?;
                if !def.primary_key.is_empty() {
                    return Err(multiple_pk(&def.name));
                }
                def.primary_key = index_columns(&pk.columns)?;
            }
            ast::TableConstraint::Unique(u) => {
                not_deferrable(&u.characteristics)?;
                def.unique.push((
                    u.name.as_ref().map(|n| crate::names::stored(crate::names::split(&def.name).0, &ident(n))),
                    index_columns(&u.columns)?,
                ));
            }
            ast::TableConstraint::ForeignKey(fk) => {
                let cols = fk.columns.iter().map(ident).collect();
                def.foreign_keys.push(self.foreign_key(fk, cols)?);
            }
            ast::TableConstraint::Check(c) => pending_checks.push((c.name.as_ref().map(ident), (*c.expr).clone())),
            other => return Err(SqlError::unsupported(format!("table constraint {other}"))),
        }
        Ok(())
    }

    fn foreign_key(&mut self, fk: &ast::ForeignKeyConstraint, columns: Vec<String>) -> Result<ForeignKeyDef> {
        let restrictive = |a: &Option<ast::ReferentialAction>| {
            matches!(a, None | Some(ast::ReferentialAction::NoAction | ast::ReferentialAction::Restrict))
        };
        if !restrictive(&fk.on_update) {
            return Err(SqlError::unsupported("ON UPDATE actions other than NO ACTION/RESTRICT"));
        }
        let on_delete = match fk.on_delete {
            None | Some(ast::ReferentialAction::NoAction | ast::ReferentialAction::Restrict) => FkAction::NoAction,
            Some(ast::ReferentialAction::Cascade) => FkAction::Cascade,
            Some(ast::ReferentialAction::SetNull) => FkAction::SetNull,
            Some(ast::ReferentialAction::SetDefault) => return Err(SqlError::unsupported("ON DELETE SET DEFAULT")),
        };
        let mut parent_table = self.relation_key(&fk.foreign_table)?;
        // A temporary table referencing itself: the name is not in the
        // catalog yet, and PostgreSQL resolves it in pg_temp, first.
        if self.creating_temp && self.catalog.table_by_name(&parent_table).is_none() {
            parent_table = self.new_temp_key(&fk.foreign_table)?;
        }
        if let Some(parent) = self.catalog.table_by_name(&parent_table).cloned() {
            self.need(&parent, crate::catalog::roles::Privs::REFERENCES);
        }
        if self.catalog.table_by_name(&parent_table).is_some_and(|t| crate::catalog::is_view(t)) {
            return Err(SqlError::new(
                "42809",
                format!("referenced relation \"{}\" is not a table", crate::names::short(&parent_table)),
            ));
        }
        Ok(ForeignKeyDef {
            name: fk.name.as_ref().map(ident),
            columns,
            parent_table,
            parent_columns: fk.referred_columns.iter().map(ident).collect(),
            on_delete,
            timing: constraint_timing(&fk.characteristics)?,
        })
    }

    /// TRUNCATE t [, ...] [RESTART IDENTITY | CONTINUE IDENTITY] [RESTRICT].
    /// A table another table's foreign key references may only go with
    /// that table (PostgreSQL's rule without CASCADE).
    pub(super) fn truncate(&mut self, t: &ast::Truncate) -> Result<Plan> {
        if matches!(t.cascade, Some(ast::CascadeOption::Cascade)) {
            return Err(SqlError::unsupported("TRUNCATE ... CASCADE"));
        }
        if t.partitions.is_some() || t.on_cluster.is_some() || t.if_exists {
            return Err(SqlError::unsupported("this TRUNCATE form"));
        }
        let mut tables: Vec<Arc<TableSchema>> = Vec::new();
        for target in &t.table_names {
            let table = self.relation(&target.name)?;
            if table.sequence.is_some() || crate::catalog::is_view(&table) {
                return Err(SqlError::new("42809", format!("\"{}\" is not a table", table.name)));
            }
            self.need(&table, crate::catalog::roles::Privs::TRUNCATE);
            // A partitioned table's rows are its partitions'.
            let partitioned = crate::catalog::partitions::is_partitioned(&table);
            if partitioned && target.only {
                return Err(SqlError::new("42809", "cannot truncate only a partitioned table")
                    .with_hint("Do not specify the ONLY keyword, or use TRUNCATE ONLY on the partitions directly."));
            }
            let parts =
                if partitioned { crate::catalog::partitions::leaves(self.catalog, &table) } else { vec![table] };
            for table in parts {
                if !tables.iter().any(|x| x.id == table.id) {
                    tables.push(table);
                }
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
                .position(|t| {
                    !self
                        .catalog
                        .referencing(t.id)
                        .iter()
                        .any(|fk| fk.child != t.id && tables.iter().any(|x| x.id == fk.child))
                })
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
    pub(super) fn name_checks(
        &mut self,
        def: &TableDef,
        pending: Vec<(Option<String>, ast::Expr)>,
        existing: &[CheckDef],
    ) -> Result<Vec<CheckDef>> {
        let columns: Vec<Column> = def
            .columns
            .iter()
            .map(|c| Column {
                name: c.name.clone(),
                ty: c.ty,
                nullable: c.nullable,
                default: None,
                sequence: None,
                default_sql: None,
            })
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
                    // A CHECK's name is the table's own, not a relation's: no schema.
                    let table = crate::names::short(&def.name);
                    let base = match read.as_slice() {
                        [c] => format!("{table}_{}_check", shape.columns[*c].name),
                        _ => format!("{table}_check"),
                    };
                    (0..)
                        .map(|k| if k == 0 { base.clone() } else { format!("{base}{k}") })
                        .find(|n| !out.iter().chain(existing).any(|c| &c.name == n))
                        .unwrap_or(base)
                }
            };
            out.push(CheckDef { name, sql: e.to_string() });
        }
        Ok(out)
    }

    /// A CHECK expression bound over `table`'s row.
    pub(super) fn check_expr(&mut self, table: &Arc<TableSchema>, e: &ast::Expr) -> Result<Expr> {
        // Refused before any name in it is looked up, as PostgreSQL does.
        let text = e.to_string();
        let tokens = sqlparser::tokenizer::Tokenizer::new(&sqlparser::dialect::PostgreSqlDialect {}, &text)
            .tokenize()
            .unwrap_or_default();
        if tokens.iter().any(
            |t| matches!(t, sqlparser::tokenizer::Token::Word(w) if w.keyword == sqlparser::keywords::Keyword::SELECT),
        ) {
            return Err(SqlError::unsupported("cannot use subquery in check constraint"));
        }
        let scope = Scope {
            rels: vec![Rel {
                name: crate::names::short(&table.name).to_owned(),
                table: table.clone(),
                offset: 0,
                source: None,
            }],
            hidden: Vec::new(),
            star: Vec::new(),
            merged: Vec::new(),
            outer: None,
        };
        let params_before = self.params.len();
        // A 'now' in it is frozen at CREATE in PostgreSQL; pgtier binds the
        // text at each write.
        let (b, t) = crate::clock::refused(|| self.expr(e, &scope, &mut ExprCtx::plain("check constraints")))?;
        if b.has_subquery() {
            return Err(SqlError::unsupported("subqueries and nextval() in check constraints"));
        }
        if self.params.len() != params_before {
            return Err(SqlError::new("42P02", "there is no parameter $1"));
        }
        match t {
            Some(DataType::Bool) => Ok(b),
            None => self.coerce(b, None, DataType::Bool, "CHECK"),
            Some(other) => Err(SqlError::datatype_mismatch(format!(
                "argument of CHECK must be type boolean, not type {}",
                type_name(other)
            ))),
        }
    }

    /// The CHECK constraints an INSERT or UPDATE of `table` enforces, bound
    /// over its row (in name order, as PostgreSQL checks them).
    /// The CHECK constraints of `table`, then its partition constraint
    /// when it is a partition (PostgreSQL's ExecConstraints order).
    pub(super) fn table_checks(&mut self, table: &Arc<TableSchema>) -> Result<Vec<BoundCheck>> {
        let mut out = self.own_checks(table)?;
        out.extend(self.partition_check(table)?);
        Ok(out)
    }

    /// The CHECK constraints of `table` alone.
    pub(super) fn own_checks(&mut self, table: &Arc<TableSchema>) -> Result<Vec<BoundCheck>> {
        let mut out = Vec::with_capacity(table.checks.len());
        for c in &table.checks {
            let e = sqlparser::parser::Parser::new(&crate::dialect::PgDialect::default())
                .try_with_sql(&c.sql)
                .and_then(|mut p| p.parse_expr())?;
            out.push(BoundCheck { name: c.name.clone(), expr: self.check_expr(table, &e)? });
        }
        Ok(out)
    }

    /// CREATE SEQUENCE's (or an identity column's) options, resolved with
    /// PostgreSQL's defaults for a sequence of type `ty`.
    pub(super) fn sequence_options(
        &mut self,
        ty: DataType,
        options: &[ast::SequenceOptions],
    ) -> Result<SequenceOptions> {
        let (mut increment, mut min, mut max, mut start, mut cycle) = (1, None, None, None, false);
        for o in options {
            match o {
                ast::SequenceOptions::IncrementBy(e, _) => increment = self.constant_int(e, "INCREMENT")?,
                ast::SequenceOptions::MinValue(e) => {
                    min = e.as_ref().map(|e| self.constant_int(e, "MINVALUE")).transpose()?
                }
                ast::SequenceOptions::MaxValue(e) => {
                    max = e.as_ref().map(|e| self.constant_int(e, "MAXVALUE")).transpose()?
                }
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

    pub(super) fn constant_default(&mut self, e: &ast::Expr, ty: DataType, column: &str) -> Result<Value> {
        let scope = Scope::default();
        let (bound, bty) = self.expr(e, &scope, &mut ExprCtx::plain("DEFAULT expressions"))?;
        let mut constant = true;
        // Volatile functions give a new value per row in PostgreSQL, never one frozen here.
        let volatile = |f: &Func| f.volatility() != crate::expr::Volatility::Immutable;
        bound.walk(&mut |x| {
            constant &= !matches!(x, Expr::Func(f, _) if volatile(f))
                && !matches!(x, Expr::Param(_) | Expr::Column(_) | Expr::Subquery(_))
        });
        if !constant {
            return Err(SqlError::unsupported("non-constant DEFAULT"));
        }
        let cast = self.assign(bound, bty, ty, column)?;
        let env = crate::expr::Env { params: &[], now_micros: 0, outer: &[] };
        cast.eval(&env, &mut crate::expr::NoSubqueries, &[])
    }

    /// CREATE TABLE name [(column, ...)] AS query: the query's column
    /// names and types (an unknown-typed one becomes text, as in
    /// PostgreSQL), no keys, defaults or constraints; filled with its rows.
    fn create_table_as(&mut self, c: &ast::CreateTable, q: &ast::Query) -> Result<Plan> {
        if c.like.is_some()
            || c.clone.is_some()
            || c.inherits.is_some()
            || c.partition_of.is_some()
            || c.partition_by.is_some()
            || !c.constraints.is_empty()
        {
            return Err(SqlError::unsupported("CREATE TABLE AS with LIKE/INHERITS/PARTITION/constraints"));
        }
        if c.columns.iter().any(|col| col.data_type != ast::DataType::Unspecified || !col.options.is_empty()) {
            return Err(SqlError::syntax("CREATE TABLE AS takes column names only"));
        }
        let names: Vec<String> = c.columns.iter().map(|col| ident(&col.name)).collect();
        let key = self.new_relation_key(&c.name)?;
        self.table_as(key, &names, q, c.if_not_exists)
    }

    /// CREATE TABLE name (LIKE source [{INCLUDING | EXCLUDING} option ...]):
    /// source's column names, types and NOT NULL constraints, as PostgreSQL
    /// copies them always, and what the options add:
    /// - DEFAULTS: constant and now() defaults, and a serial's or
    ///   nextval's default as `nextval` of the same sequence (which the
    ///   new table does not own);
    /// - CONSTRAINTS: the CHECK constraints, under their names;
    /// - INDEXES: the primary key, the unique constraints and the indexes,
    ///   named by PostgreSQL's default rules for the new table;
    /// - IDENTITY of an identity column is refused (0A000: PostgreSQL makes
    ///   the new table its own sequence); without it the column is plain.
    /// - COMMENTS, COMPRESSION, GENERATED, STATISTICS and STORAGE copy
    ///   nothing pgtier has.
    fn create_table_like(&mut self, c: &ast::CreateTable, like: &ast::CreateTableLike) -> Result<Plan> {
        use crate::dialect::like_option;
        if c.clone.is_some()
            || c.inherits.is_some()
            || c.partition_of.is_some()
            || c.partition_by.is_some()
            || !c.constraints.is_empty()
            || !c.columns.is_empty()
        {
            return Err(SqlError::unsupported("CREATE TABLE (LIKE ...) with other table elements"));
        }
        let source = self.relation(&like.name)?;
        if source.sequence.is_some() {
            return Err(SqlError::unsupported("CREATE TABLE (LIKE a sequence)"));
        }
        let defaults = like.defaults == Some(ast::CreateTableLikeDefaults::Including);
        let options = crate::dialect::like_options(c).unwrap_or(if defaults { like_option::DEFAULTS } else { 0 });
        let name = self.new_relation_key(&c.name)?;
        let is_identity = |kind: SequenceDefault| {
            matches!(kind, SequenceDefault::IdentityAlways | SequenceDefault::IdentityByDefault)
        };
        let mut columns = Vec::new();
        for col in source.visible_columns() {
            let mut cd = ColumnDef::new(col.name.clone(), col.ty);
            cd.nullable = col.nullable;
            match col.sequence {
                Some((seq_id, kind)) if !is_identity(kind) && options & like_option::DEFAULTS != 0 => {
                    let seq = self
                        .catalog
                        .table(seq_id)
                        .ok_or_else(|| SqlError::new("XX000", "a default's sequence is gone"))?;
                    cd.sequence = Some((seq.name.clone(), SequenceDefault::Nextval));
                    cd.default_sql = col.default_sql.clone();
                }
                Some((_, kind)) if is_identity(kind) && options & like_option::IDENTITY != 0 => {
                    return Err(SqlError::unsupported("INCLUDING IDENTITY of an identity column"));
                }
                Some(_) => {}
                // A cached identity column (PostgreSQL's sequence): as a local one.
                None if crate::catalog::identity_kind(col).is_some() && options & like_option::IDENTITY != 0 => {
                    return Err(SqlError::unsupported("INCLUDING IDENTITY of an identity column"));
                }
                None if crate::catalog::identity_kind(col).is_some() => {}
                None if options & like_option::DEFAULTS != 0 => {
                    cd.default = col.default.clone();
                    cd.default_sql = col.default_sql.clone();
                }
                None => {}
            }
            columns.push(cd);
        }
        let mut def = TableDef::new(name.clone(), columns, &[]);
        if options & like_option::CONSTRAINTS != 0 {
            def.checks = source.checks.clone();
        }
        let mut indexes = Vec::new();
        if options & like_option::INDEXES != 0 {
            let column_names = |cols: &[usize]| -> Vec<String> {
                cols.iter().filter_map(|&i| source.columns.get(i)).map(|c| c.name.clone()).collect()
            };
            if !source.has_rowid() {
                def.primary_key = column_names(&source.primary_key);
            }
            for index in self.catalog.indexes_of(source.id) {
                if index.primary {
                    continue;
                }
                let cols = column_names(&index.columns);
                // A unique constraint's index is `<table>_<columns>_key`; a
                // CREATE [UNIQUE] INDEX's is copied as an index.
                if index.unique
                    && index.name.ends_with("_key")
                    && index.include.is_empty()
                    && index.options == IndexOptions::default()
                {
                    def.unique.push((None, cols));
                } else {
                    let include = column_names(&index.include);
                    let index_name =
                        format!("{name}_{}_idx", index_name_columns(cols.iter().chain(&include)).join("_"));
                    indexes.push(IndexDef {
                        name: index_name,
                        table: name.clone(),
                        columns: cols,
                        unique: index.unique,
                        include,
                        options: index.options.clone(),
                    });
                }
            }
        }
        Ok(Plan::CreateTable { def, if_not_exists: c.if_not_exists, sequences: Vec::new(), indexes })
    }

    /// CREATE TABLE AS and SELECT INTO: a table of `query`'s columns (named
    /// `names` first) and the plan that fills it.
    pub(super) fn table_as(
        &mut self,
        name: String,
        names: &[String],
        q: &ast::Query,
        if_not_exists: bool,
    ) -> Result<Plan> {
        let query = self.query(q, None)?;
        let out = &query.columns[..query.visible];
        if names.len() > out.len() {
            return Err(SqlError::syntax("too many column names were specified"));
        }
        let mut columns: Vec<ColumnDef> = Vec::with_capacity(out.len());
        for (k, oc) in out.iter().enumerate() {
            let cname = names.get(k).cloned().unwrap_or_else(|| oc.name.clone());
            if columns.iter().any(|c| c.name == cname) {
                return Err(SqlError::new("42701", format!("column \"{cname}\" specified more than once")));
            }
            let ty = oc.ty.unwrap_or(DataType::Text);
            if crate::value::types::is_pseudo(ty) {
                return Err(SqlError::unsupported(format!("a table column of type {}", type_name(ty))));
            }
            columns.push(ColumnDef::new(cname, ty));
        }
        Ok(Plan::CreateTableAs { def: TableDef::new(name, columns, &[]), query: Box::new(query), if_not_exists })
    }

    pub(super) fn create_index(&mut self, c: &ast::CreateIndex) -> Result<Plan> {
        if !c.with.is_empty() || c.concurrently || !c.index_options.is_empty() || !c.alter_options.is_empty() {
            return Err(SqlError::unsupported("CREATE INDEX with WITH/CONCURRENTLY"));
        }
        if c.predicate.is_some() {
            return Err(SqlError::unsupported("a partial index (CREATE INDEX ... WHERE)"));
        }
        // pgtier's unique indexes let NULLs repeat, as NULLS DISTINCT does.
        if c.nulls_distinct == Some(false) {
            return Err(SqlError::unsupported("a unique index with NULLS NOT DISTINCT"));
        }
        if let Some(using) = &c.using
            && using.to_string().to_lowercase() != "btree"
        {
            return Err(SqlError::unsupported(format!("index method {using}")));
        }
        let table = self.relation_key(&c.table_name)?;
        if self.catalog.table_by_name(&table).is_some_and(|t| crate::catalog::is_view(t)) {
            return Err(SqlError::new(
                "42809",
                format!("cannot create index on relation \"{}\"", crate::names::short(&table)),
            )
            .with_detail("This operation is not supported for views."));
        }
        let (columns, keys) = index_keys(&c.columns)?;
        let include: Vec<String> = c.include.iter().map(ident).collect();
        if let Ok(schema) = self.table(&c.table_name) {
            if crate::catalog::partitions::is_partitioned(&schema) {
                return Err(SqlError::unsupported("CREATE INDEX on a partitioned table"));
            }
            self.need_owner(&schema);
            let type_of = |name: &String| schema.columns.iter().find(|c| c.name == *name).map(|c| c.ty);
            for (col, key) in columns.iter().zip(&keys) {
                if let Some(ty) = type_of(col) {
                    match &key.opclass {
                        Some(opclass) => opclass_accepts(opclass, ty)?,
                        None => no_btree_class(ty)?,
                    }
                }
            }
        }
        let name = match &c.name {
            Some(n) => self.beside(&table, n)?,
            None => format!("{table}_{}_idx", index_name_columns(columns.iter().chain(&include)).join("_")),
        };
        let plain = keys.iter().all(|k| *k == IndexKeyOptions::default());
        let options = IndexOptions { keys: if plain { Vec::new() } else { keys }, predicate: None };
        Ok(Plan::CreateIndex {
            def: IndexDef { name, table, columns, unique: c.unique, include, options },
            if_not_exists: c.if_not_exists,
        })
    }
}

/// The column names an index's default name is made of, a repeated one
/// numbered as PostgreSQL's ChooseIndexColumnNames numbers it (`INCLUDE
/// (b, b)`: `b_b1`).
fn index_name_columns<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let mut candidate = name.clone();
        let mut n = 0;
        while out.contains(&candidate) {
            n += 1;
            candidate = format!("{name}{n}");
        }
        out.push(candidate);
    }
    out
}

/// Whether the pattern operator class `opclass` takes a key of type `ty`,
/// with PostgreSQL's error when it does not. bpchar_pattern_ops over text
/// or varchar is refused: PostgreSQL accepts it and then ignores trailing
/// blanks, which would make 'a' and 'a ' one key of a unique index.
pub(super) fn opclass_accepts(opclass: &str, ty: DataType) -> Result<()> {
    let bpchar = opclass == "bpchar_pattern_ops";
    match ty {
        DataType::Char(_) if bpchar => Ok(()),
        DataType::Text | DataType::Varchar(_) if !bpchar => Ok(()),
        DataType::Text | DataType::Varchar(_) => {
            Err(SqlError::unsupported(format!("operator class {opclass} on a {} key", type_name(ty))))
        }
        _ => Err(SqlError::new(
            "42804",
            format!(
                "operator class \"{opclass}\" does not accept data type {}",
                crate::catalog::format_type(crate::catalog::column_type_info(ty).type_oid, None)
            ),
        )),
    }
}

/// json has no equality, so no btree operator class: no key or index on it.
fn no_btree_class(ty: DataType) -> Result<()> {
    if ty == DataType::Json {
        return Err(SqlError::new("42704", "data type json has no default operator class for access method \"btree\"")
            .with_hint("You must specify an operator class for the index or define a default operator class for the data type."));
    }
    Ok(())
}

fn multiple_pk(table: &str) -> SqlError {
    SqlError::new("42P16", format!("multiple primary keys for table \"{table}\" are not allowed"))
}

/// `DEFAULT now()` (or a synonym) on a timestamp or date column: the text
/// the catalog keeps for it.
fn now_default(e: &ast::Expr, ty: DataType) -> Option<&'static str> {
    let f = call_without_arguments(e)?;
    let [part] = f.name.0.as_slice() else { return None };
    let name = part.as_ident()?.value.to_lowercase();
    if !matches!(ty, DataType::Timestamp(_) | DataType::TimestampTz(_) | DataType::Date) {
        return None;
    }
    NOW_DEFAULTS.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// `e` as a plain call with no arguments (`f()`, no OVER), the form of the
/// volatile defaults kept as text.
fn call_without_arguments(e: &ast::Expr) -> Option<&ast::Function> {
    let ast::Expr::Function(f) = e else { return None };
    let empty = match &f.args {
        ast::FunctionArguments::None => true,
        ast::FunctionArguments::List(l) => l.args.is_empty(),
        ast::FunctionArguments::Subquery(_) => false,
    };
    (empty && f.over.is_none()).then_some(f)
}

/// `DEFAULT gen_random_uuid()` on a uuid column: a new uuid per row, kept
/// as the text PostgreSQL prints for it.
fn uuid_default(e: &ast::Expr, ty: DataType) -> Option<&'static str> {
    let f = call_without_arguments(e)?;
    let name = f.name.0.last().and_then(|p| p.as_ident()).map(ident)?;
    let qualified_ok = f.name.0.len() == 1
        || (f.name.0.len() == 2 && f.name.0[0].as_ident().is_some_and(|s| ident(s) == "pg_catalog"));
    (ty == DataType::Uuid && qualified_ok && name == "gen_random_uuid").then_some(UUID_DEFAULT)
}

/// The catalog text of a `DEFAULT gen_random_uuid()`.
pub(super) const UUID_DEFAULT: &str = "gen_random_uuid()";

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

/// The columns of a PRIMARY KEY or UNIQUE constraint (PostgreSQL's grammar
/// has no order or operator class there).
pub(super) fn index_columns(cols: &[ast::IndexColumn]) -> Result<Vec<String>> {
    cols.iter()
        .map(|c| {
            if c.column.options.asc.is_some() || c.column.options.nulls_first.is_some() || c.operator_class.is_some() {
                return Err(SqlError::unsupported(format!("constraint key order or operator class ({c})")));
            }
            key_column(c)
        })
        .collect()
}

/// A CREATE INDEX's key columns with how each is declared. The engine's
/// index is the same whatever the order (a btree is read either way) and
/// whichever pattern class (see `catalog::PATTERN_OPCLASSES`); other
/// operator classes are refused.
fn index_keys(cols: &[ast::IndexColumn]) -> Result<(Vec<String>, Vec<IndexKeyOptions>)> {
    let mut names = Vec::with_capacity(cols.len());
    let mut keys = Vec::with_capacity(cols.len());
    for c in cols {
        names.push(key_column(c)?);
        let descending = c.column.options.asc == Some(false);
        let opclass = match &c.operator_class {
            None => None,
            Some(name) => Some(pattern_opclass(name).ok_or_else(|| {
                SqlError::unsupported(format!("operator class {name} (only the pattern classes are)"))
            })?),
        };
        // NULLS FIRST is what DESC implies, as in PostgreSQL.
        keys.push(IndexKeyOptions {
            descending,
            nulls_first: c.column.options.nulls_first.unwrap_or(descending),
            opclass,
        });
    }
    Ok((names, keys))
}

/// `name` (possibly `pg_catalog.`-qualified) when it is a pattern operator class.
fn pattern_opclass(name: &ast::ObjectName) -> Option<String> {
    let parts: Vec<String> = name.0.iter().map(|p| p.as_ident().map(ident)).collect::<Option<_>>()?;
    let short = match parts.as_slice() {
        [n] => n,
        [schema, n] if schema == "pg_catalog" => n,
        _ => return None,
    };
    crate::catalog::PATTERN_OPCLASSES.iter().find(|(n, _)| n == short).map(|(n, _)| (*n).to_owned())
}

fn key_column(c: &ast::IndexColumn) -> Result<String> {
    match &c.column.expr {
        ast::Expr::Identifier(i) => Ok(ident(i)),
        other => Err(SqlError::unsupported(format!("index on expression {other}"))),
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

/// `[NOT] DEFERRABLE [INITIALLY DEFERRED | IMMEDIATE]` as PostgreSQL reads
/// it (INITIALLY DEFERRED implies DEFERRABLE). `[NOT] ENFORCED` is not
/// PostgreSQL 15 syntax.
fn constraint_timing(c: &Option<ast::ConstraintCharacteristics>) -> Result<FkTiming> {
    let Some(c) = c else { return Ok(FkTiming::Immediate) };
    if c.enforced.is_some() {
        return Err(SqlError::new("42601", "syntax error at or near \"ENFORCED\""));
    }
    Ok(match (c.deferrable, c.initially) {
        (Some(false), Some(ast::DeferrableInitial::Deferred)) => {
            return Err(SqlError::new("42601", "constraint declared INITIALLY DEFERRED must be DEFERRABLE"));
        }
        (_, Some(ast::DeferrableInitial::Deferred)) => FkTiming::DeferrableDeferred,
        (Some(true), _) => FkTiming::DeferrableImmediate,
        (None | Some(false), _) => FkTiming::Immediate,
    })
}

/// Only foreign keys can be deferred here: a DEFERRABLE primary key or
/// UNIQUE constraint (checked at commit in PostgreSQL) is refused rather
/// than checked at once.
fn not_deferrable(c: &Option<ast::ConstraintCharacteristics>) -> Result<()> {
    if constraint_timing(c)?.deferrable() {
        return Err(SqlError::unsupported("DEFERRABLE primary key and unique constraints"));
    }
    Ok(())
}
