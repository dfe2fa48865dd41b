//! ALTER TABLE and ALTER INDEX ... RENAME TO. The table's new definition
//! is built from its current one by each subcommand in order, with how
//! every new column's value comes from an old row (bound here over the old
//! row, evaluated by `exec::alter`); the engine rewrites the table under a
//! new id (`Transaction::alter_table`). PostgreSQL's rules: DROP COLUMN
//! takes the table's own indexes and constraints on the column with it,
//! and needs CASCADE for another table's foreign key (then that table is
//! altered first, without the foreign key);
//! ALTER COLUMN TYPE converts by assignment casts or USING.

use std::sync::Arc;

use pgtier_engine::{
    AlterTableDef, Catalog, CheckDef, Column, ColumnDef, DataType, ForeignKeyDef, IndexDef, IndexOptions,
    SequenceDefault, TableDef, TableSchema,
};
use sqlparser::ast;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::coerce::check_assignable;
use super::{Binder, ExprCtx, Rel, Scope, ident};
use crate::catalog::quote_ident;
use crate::error::{Result, SqlError, SqlNotice};
use crate::expr::Expr;
use crate::plan::{AlterPlan, ColumnSequence, Plan};
use crate::value::{self, type_name};

/// PostgreSQL's system column names (no user column has them).
const SYSTEM_COLUMNS: [&str; 6] = ["ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"];

/// The definition being altered.
struct Work {
    old: Arc<TableSchema>,
    def: TableDef,
    /// Per column of `def`: the old column it continues (None: added).
    sources: Vec<Option<usize>>,
    /// Per column of `def`: its value over the old row when not the old
    /// column's unchanged (a new column's default, a type conversion).
    fill: Vec<Option<Expr>>,
    indexes: Vec<IndexDef>,
    pending_checks: Vec<(Option<String>, ast::Expr)>,
    sequences: Vec<ColumnSequence>,
    drop_sequences: Vec<String>,
    notices: Vec<SqlNotice>,
    /// The primary key's index name (`<table>_pkey` as created).
    pkey_name: Option<String>,
    /// The old table's dropped attribute numbers plus those of the old
    /// columns dropped now.
    dropped_attnums: Vec<u16>,
    /// Other tables' foreign keys CASCADE drops: (table, constraint name).
    cascade_fks: Vec<(Arc<TableSchema>, String)>,
}

impl Work {
    /// `old`'s definition as DDL would state it.
    fn new(catalog: &Catalog, old: &Arc<TableSchema>) -> Result<Work> {
        let name_of = |c: usize| old.columns[c].name.clone();
        let mut columns = Vec::new();
        for col in old.visible_columns() {
            let sequence = match col.sequence {
                None => None,
                Some((seq, how)) => Some((
                    catalog
                        .table(seq)
                        .map(|s| s.name.clone())
                        .ok_or_else(|| SqlError::new("XX000", "a column's sequence is missing"))?,
                    how,
                )),
            };
            columns.push(ColumnDef {
                name: col.name.clone(),
                ty: col.ty,
                nullable: col.nullable,
                default: col.default.clone(),
                sequence,
                default_sql: col.default_sql.clone(),
            });
        }
        let primary_key: Vec<String> =
            if old.has_rowid() { Vec::new() } else { old.primary_key.iter().map(|&c| name_of(c)).collect() };
        let mut def = TableDef::new(old.name.clone(), columns, &[]);
        def.primary_key = primary_key;
        def.checks = old.checks.clone();
        // A partitioned table's key and partitions.
        if crate::catalog::partitions::is_partitioned(old) {
            def.annotation.clone_from(&old.annotation);
        }
        let fks = catalog.foreign_keys_of(old.id);
        let mut indexes = Vec::new();
        let mut pkey_name = None;
        for i in catalog.indexes_of(old.id) {
            let cols: Vec<String> = i.columns.iter().map(|&c| name_of(c)).collect();
            let declared = !i.include.is_empty() || i.options != IndexOptions::default();
            if i.primary {
                def.primary_key_ordered = i.ordered;
                if !old.has_rowid() {
                    pkey_name = Some(i.name.clone());
                }
            } else if i.unique && !declared {
                def.unique.push((Some(i.name.clone()), cols));
            } else if !fks.iter().any(|f| f.child_index == i.id && i.name == format!("{}_idx", f.name)) {
                indexes.push(IndexDef {
                    name: i.name.clone(),
                    table: old.name.clone(),
                    columns: cols,
                    unique: i.unique,
                    include: i.include.iter().map(|&c| name_of(c)).collect(),
                    options: i.options.clone(),
                });
            }
        }
        for f in &fks {
            let parent =
                catalog.table(f.parent).ok_or_else(|| SqlError::new("XX000", "a foreign key's table is missing"))?;
            def.foreign_keys.push(ForeignKeyDef {
                name: Some(f.name.clone()),
                columns: f.child_columns.iter().map(|&c| name_of(c)).collect(),
                parent_table: parent.name.clone(),
                parent_columns: f.parent_columns.iter().map(|&c| parent.columns[c].name.clone()).collect(),
                on_delete: f.on_delete,
                timing: f.timing,
            });
        }
        let n = def.columns.len();
        Ok(Work {
            old: Arc::clone(old),
            def,
            sources: (0..n).map(Some).collect(),
            fill: vec![None; n],
            indexes,
            pending_checks: Vec::new(),
            sequences: Vec::new(),
            drop_sequences: Vec::new(),
            notices: Vec::new(),
            pkey_name,
            dropped_attnums: old.dropped_attnums.clone(),
            cascade_fks: Vec::new(),
        })
    }

    fn column(&self, name: &str) -> Option<usize> {
        self.def.columns.iter().position(|c| c.name == name)
    }

    fn require_column(&self, name: &str) -> Result<usize> {
        self.column(name).ok_or_else(|| {
            SqlError::new(
                "42703",
                format!("column \"{name}\" of relation \"{}\" does not exist", crate::names::short(&self.def.name)),
            )
        })
    }

    /// Names of constraints on this table (PostgreSQL keeps them unique per table).
    fn constraint_taken(&self, name: &str) -> bool {
        self.pkey_name.as_deref() == Some(name)
            || self.def.unique.iter().any(|(n, _)| n.as_deref() == Some(name))
            || self.def.foreign_keys.iter().any(|f| f.name.as_deref() == Some(name))
            || self.def.checks.iter().any(|c| c.name == name)
    }
}

impl Binder<'_> {
    pub(super) fn alter_table(&mut self, a: &ast::AlterTable) -> Result<Plan> {
        if a.location.is_some() || a.on_cluster.is_some() || a.table_type.is_some() {
            return Err(SqlError::unsupported("this ALTER TABLE form"));
        }
        if let Some(on) = Self::analytics_switch(a) {
            return self.set_analytics(a, on);
        }
        if self.stored_relation(&a.name)?.is_none() && a.if_exists {
            let name = super::parts(&a.name)?.pop().unwrap_or_default();
            let notice =
                SqlNotice { sqlstate: "00000", message: format!("relation \"{name}\" does not exist, skipping") };
            return Ok(Plan::AlterTable(Box::new(AlterPlan::skipped(notice))));
        }
        let table = self.table(&a.name)?;
        if crate::catalog::partitions::is_partitioned(&table) {
            return self.alter_partitioned(&table, &a.operations);
        }
        super::partition::refuse_partitioned(self.catalog, &table, "ALTER TABLE")?;
        if let [ast::AlterTableOperation::OwnerTo { new_owner }] = a.operations.as_slice() {
            return self.alter_owner(&table, new_owner);
        }
        if let [
            op @ (ast::AlterTableOperation::EnableTrigger { name } | ast::AlterTableOperation::DisableTrigger { name }),
        ] = a.operations.as_slice()
        {
            self.need_owner(&table);
            let enable = matches!(op, ast::AlterTableOperation::EnableTrigger { .. });
            return self.enable_trigger(&table, &ident(name), enable);
        }
        self.need_owner(&table);
        let renames = a.operations.iter().any(|op| {
            matches!(
                op,
                ast::AlterTableOperation::RenameColumn { .. }
                    | ast::AlterTableOperation::RenameTable { .. }
                    | ast::AlterTableOperation::RenameConstraint { .. }
            )
        });
        if renames && a.operations.len() > 1 {
            // PostgreSQL's grammar has RENAME as a statement of its own.
            return Err(SqlError::syntax("syntax error: RENAME cannot be combined with other ALTER TABLE subcommands"));
        }
        if table.sequence.is_some() && renames {
            // PostgreSQL renames a sequence with ALTER TABLE too; pgtier's
            // column defaults hold sequences by id under a fixed name.
            return Err(SqlError::unsupported("renaming a sequence"));
        }
        let mut w = self.work(&table)?;
        for op in &a.operations {
            self.alter_op(&mut w, op)?;
        }
        self.finish_alter(w, "ALTER TABLE")
    }

    /// ALTER TABLE of a partitioned table: the subcommands that recurse
    /// to every partition as PostgreSQL's do (ADD / DROP COLUMN, ADD CHECK,
    /// DROP CONSTRAINT), each partition altered first, then the table.
    fn alter_partitioned(&mut self, table: &Arc<TableSchema>, ops: &[ast::AlterTableOperation]) -> Result<Plan> {
        use ast::AlterTableOperation as Op;
        let mut tables = vec![Arc::clone(table)];
        let mut k = 0;
        while let Some(t) = tables.get(k).cloned() {
            if let Some(spec) = crate::catalog::partitions::PartitionSpec::decode(&t) {
                for op in ops {
                    if let Op::DropColumn { column_names, .. } = op {
                        refuse_key_drop(&t, &spec, column_names)?;
                    }
                }
                tables.extend(spec.partitions.iter().filter_map(|p| self.catalog.table_by_name(&p.name).cloned()));
            }
            k += 1;
        }
        let plain = |c: &ast::ColumnDef| {
            c.options.iter().all(|o| {
                matches!(o.option, ast::ColumnOption::Null | ast::ColumnOption::NotNull | ast::ColumnOption::Default(_))
            })
        };
        let recurses = |op: &Op| match op {
            Op::AddColumn { if_not_exists: false, column_def, column_position: None, .. } => plain(column_def),
            Op::DropColumn { if_exists: false, drop_behavior: None, .. } => true,
            Op::AddConstraint { constraint: ast::TableConstraint::Check(_), not_valid: false } => true,
            Op::DropConstraint { if_exists: false, drop_behavior: None, .. } => true,
            _ => false,
        };
        // A partition's columns and inherited constraints are its parent's.
        let partition = crate::catalog::partitions::parent_of(self.catalog, &table.name).is_some();
        let own = |op: &Op| matches!(op, Op::AddConstraint { constraint: ast::TableConstraint::Check(_), .. });
        if partition && !ops.iter().all(own) {
            return Err(SqlError::unsupported("this ALTER TABLE of a partition"));
        }
        if !ops.iter().all(recurses) {
            return Err(SqlError::unsupported("this ALTER TABLE of a partitioned table"));
        }
        let mut plans: Vec<AlterPlan> = Vec::new();
        let mut ops = ops.to_vec();
        for (n, t) in tables.iter().enumerate() {
            self.need_owner(t);
            if !self.deps.iter().any(|d| Arc::ptr_eq(d, t)) {
                self.deps.push(Arc::clone(t));
            }
            let mut w = self.work(t)?;
            for op in &ops {
                if let Op::DropConstraint { name, .. } = op
                    && n > 0
                    && !w.def.checks.iter().any(|c| c.name == ident(name))
                {
                    return Err(SqlError::unsupported(
                        "DROP CONSTRAINT of a partitioned table's constraint a partition lacks",
                    ));
                }
                self.alter_op(&mut w, op)?;
            }
            let Plan::AlterTable(p) = self.finish_alter(w, "ALTER TABLE")? else {
                return Err(SqlError::new("XX000", "ALTER TABLE without its plan"));
            };
            if n == 0 {
                // The partitions' constraints take the partitioned table's names.
                let mut added = p.alter.def.checks.iter().filter(|c| !t.checks.iter().any(|o| o.name == c.name));
                for op in &mut ops {
                    if let Op::AddConstraint { constraint: ast::TableConstraint::Check(c), .. } = op
                        && c.name.is_none()
                    {
                        c.name = added.next().map(|a| ast::Ident::with_quote('"', a.name.clone()));
                    }
                }
            }
            plans.push(*p);
        }
        let mut top = plans.remove(0);
        top.before.extend(plans);
        Ok(Plan::AlterTable(Box::new(top)))
    }

    /// ALTER INDEX name RENAME TO new: the index's table altered with the
    /// index renamed (a UNIQUE constraint's name changes with its index).
    pub(super) fn alter_index(&mut self, name: &ast::ObjectName, op: &ast::AlterIndexOperation) -> Result<Plan> {
        let ast::AlterIndexOperation::RenameIndex { index_name } = op;
        let name = self.relation_key(name)?;
        let new = self.beside(&name, index_name)?;
        let index = self
            .catalog
            .index_by_name(&name)
            .cloned()
            .ok_or_else(|| SqlError::new("42P01", format!("relation \"{name}\" does not exist")))?;
        let table = self
            .catalog
            .table(index.table)
            .cloned()
            .ok_or_else(|| SqlError::new("XX000", "an index's table is missing"))?;
        if !self.deps.iter().any(|d| Arc::ptr_eq(d, &table)) {
            self.deps.push(Arc::clone(&table));
        }
        let mut w = self.work(&table)?;
        self.relation_name_free(&new)?;
        if let Some((n, _)) = w.def.unique.iter_mut().find(|(n, _)| n.as_deref() == Some(name.as_str())) {
            *n = Some(new);
        } else if let Some(i) = w.indexes.iter_mut().find(|i| i.name == name) {
            i.name = new;
        } else {
            return Err(SqlError::unsupported("renaming a primary key's or a foreign key's index"));
        }
        self.finish_alter(w, "ALTER INDEX")
    }

    fn work(&mut self, table: &Arc<TableSchema>) -> Result<Work> {
        if table.sequence.is_some() {
            return Err(SqlError::new("42809", format!("\"{}\" is not a table", table.name)));
        }
        if crate::catalog::is_view(table) {
            return Err(SqlError::unsupported(format!("ALTER of view \"{}\" (drop and create it again)", table.name)));
        }
        // A view keeps its query's text: a renamed, dropped or retyped
        // column would leave it reading something else or nothing.
        if let Some(view) = crate::catalog::dependent_views(self.catalog, &table.name).first() {
            return Err(SqlError::unsupported(format!(
                "ALTER TABLE \"{}\" while view \"{}\" depends on it",
                table.name, view.name
            )));
        }
        if table.annotation.is_some() && !crate::catalog::partitions::is_partitioned(table) {
            return Err(SqlError::new(
                "55000",
                format!("cannot alter table \"{}\": it belongs to a cache group, whose definition mirrors the PostgreSQL table", table.name),
            )
            .with_hint("Alter the table in PostgreSQL, then drop and re-create the cache group."));
        }
        Work::new(self.catalog, table)
    }

    fn relation_name_free(&self, name: &str) -> Result<()> {
        if self.catalog.table_by_name(name).is_some() || self.catalog.index_by_name(name).is_some() {
            return Err(SqlError::new("42P07", format!("relation \"{}\" already exists", crate::names::short(name))));
        }
        Ok(())
    }

    fn alter_op(&mut self, w: &mut Work, op: &ast::AlterTableOperation) -> Result<()> {
        use ast::AlterTableOperation as Op;
        match op {
            Op::AddColumn { if_not_exists, column_def, column_position: None, .. } => {
                self.add_column(w, *if_not_exists, column_def)?
            }
            Op::DropColumn { column_names, if_exists, drop_behavior, .. } => {
                self.drop_columns(w, column_names, *if_exists, drop_behavior.as_ref())?
            }
            Op::RenameColumn { old_column_name, new_column_name } => {
                rename_column_to(w, old_column_name, new_column_name)?
            }
            Op::RenameTable { table_name: ast::RenameTableNameKind::To(n) | ast::RenameTableNameKind::As(n) } => {
                if !crate::catalog::triggers::triggers_of(self.catalog, &w.old.name).is_empty() {
                    // Triggers are stored under their table's name.
                    return Err(SqlError::unsupported("renaming a table with triggers"));
                }
                self.rename_table_to(w, n)?
            }
            Op::AlterColumn { column_name, op } => self.alter_column(w, &ident(column_name), op)?,
            Op::AddConstraint { constraint, not_valid: false } => self.add_constraint(w, constraint)?,
            Op::AddConstraint { not_valid: true, .. } => {
                return Err(SqlError::unsupported("ADD CONSTRAINT ... NOT VALID"));
            }
            Op::DropConstraint { if_exists, name, drop_behavior } => {
                let cascade = matches!(drop_behavior, Some(ast::DropBehavior::Cascade));
                self.drop_constraint(w, &ident(name), *if_exists, cascade)?;
            }
            Op::RenameConstraint { old_name, new_name } => self.rename_constraint(w, old_name, new_name)?,
            other => return Err(SqlError::unsupported(format!("ALTER TABLE ... {other}"))),
        }
        Ok(())
    }

    /// ADD COLUMN: its default (or NULL) filled into the existing rows.
    fn add_column(&mut self, w: &mut Work, if_not_exists: bool, column_def: &ast::ColumnDef) -> Result<()> {
        let cname = ident(&column_def.name);
        if w.column(&cname).is_some() {
            let message =
                format!("column \"{cname}\" of relation \"{}\" already exists", crate::names::short(&w.def.name));
            if if_not_exists {
                w.notices.push(SqlNotice { sqlstate: "42701", message: format!("{message}, skipping") });
                return Ok(());
            }
            return Err(SqlError::new("42701", message));
        }
        let seqs_before = w.sequences.len();
        let cd = self.column_def(column_def, &mut w.def, &mut w.sequences, &mut w.pending_checks)?;
        if w.sequences.len() != seqs_before {
            return Err(SqlError::unsupported("ADD COLUMN of a serial or identity column"));
        }
        if w.pkey_name.is_none() && !w.def.primary_key.is_empty() {
            w.pkey_name = Some(format!("{}_pkey", crate::names::short(&w.def.name)));
        }
        let fill = self.default_fill(&cd)?;
        w.def.columns.push(cd);
        w.sources.push(None);
        w.fill.push(Some(fill));
        Ok(())
    }

    /// DROP COLUMN of each named column, in turn.
    fn drop_columns(
        &mut self,
        w: &mut Work,
        column_names: &[ast::Ident],
        if_exists: bool,
        drop_behavior: Option<&ast::DropBehavior>,
    ) -> Result<()> {
        let cascade = matches!(drop_behavior, Some(ast::DropBehavior::Cascade));
        for c in column_names {
            let cname = ident(c);
            if SYSTEM_COLUMNS.contains(&cname.as_str()) {
                return Err(SqlError::new("0A000", format!("cannot drop system column \"{cname}\"")));
            }
            match w.column(&cname) {
                Some(i) => self.drop_column(w, i, cascade)?,
                None if if_exists => w.notices.push(SqlNotice {
                    sqlstate: "00000",
                    message: format!(
                        "column \"{cname}\" of relation \"{}\" does not exist, skipping",
                        crate::names::short(&w.def.name)
                    ),
                }),
                None => {
                    return Err(SqlError::new(
                        "42703",
                        format!(
                            "column \"{cname}\" of relation \"{}\" does not exist",
                            crate::names::short(&w.def.name)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// RENAME TO: the foreign keys to the table itself and its indexes follow.
    fn rename_table_to(&mut self, w: &mut Work, n: &ast::ObjectName) -> Result<()> {
        let new = self.beside(&w.def.name, n)?;
        self.relation_name_free(&new)?;
        let old = std::mem::replace(&mut w.def.name, new.clone());
        for fk in &mut w.def.foreign_keys {
            if fk.parent_table == old {
                fk.parent_table.clone_from(&new);
            }
        }
        for i in &mut w.indexes {
            i.table.clone_from(&new);
        }
        Ok(())
    }

    /// ADD CONSTRAINT: its name free, one primary key, whose columns become NOT NULL.
    fn add_constraint(&mut self, w: &mut Work, constraint: &ast::TableConstraint) -> Result<()> {
        let named = match constraint {
            ast::TableConstraint::PrimaryKey(c) => c.name.as_ref(),
            ast::TableConstraint::Unique(c) => c.name.as_ref(),
            ast::TableConstraint::ForeignKey(c) => c.name.as_ref(),
            ast::TableConstraint::Check(c) => c.name.as_ref(),
            _ => None,
        };
        if let Some(n) = named.map(ident)
            && w.constraint_taken(&n)
        {
            return Err(SqlError::new(
                "42710",
                format!("constraint \"{n}\" for relation \"{}\" already exists", crate::names::short(&w.def.name)),
            ));
        }
        if matches!(constraint, ast::TableConstraint::PrimaryKey(_)) && !w.def.primary_key.is_empty() {
            return Err(SqlError::new(
                "42P16",
                format!("multiple primary keys for table \"{}\" are not allowed", crate::names::short(&w.def.name)),
            ));
        }
        let had_pk = !w.def.primary_key.is_empty();
        self.table_constraint(constraint, &mut w.def, &mut w.pending_checks)?;
        if !had_pk && !w.def.primary_key.is_empty() {
            w.pkey_name = Some(named.map_or_else(|| format!("{}_pkey", crate::names::short(&w.def.name)), ident));
        }
        for k in w.def.primary_key.clone() {
            let i = w.require_column(&k)?;
            w.def.columns[i].nullable = false;
        }
        Ok(())
    }

    /// RENAME CONSTRAINT of a unique, foreign key or CHECK constraint.
    fn rename_constraint(&mut self, w: &mut Work, old_name: &ast::Ident, new_name: &ast::Ident) -> Result<()> {
        let (old, new) = (ident(old_name), ident(new_name));
        if w.constraint_taken(&new) {
            return Err(SqlError::new(
                "42710",
                format!("constraint \"{new}\" for relation \"{}\" already exists", crate::names::short(&w.def.name)),
            ));
        }
        if let Some((n, _)) = w.def.unique.iter_mut().find(|(n, _)| n.as_deref() == Some(old.as_str())) {
            self.relation_name_free(&new)?;
            *n = Some(new);
        } else if let Some(f) = w.def.foreign_keys.iter_mut().find(|f| f.name.as_deref() == Some(old.as_str())) {
            f.name = Some(new);
        } else if let Some(c) = w.def.checks.iter_mut().find(|c| c.name == old) {
            c.name = new;
        } else if w.pkey_name.as_deref() == Some(old.as_str()) {
            return Err(SqlError::unsupported("renaming a primary key constraint"));
        } else {
            return Err(SqlError::new(
                "42704",
                format!("constraint \"{old}\" for table \"{}\" does not exist", crate::names::short(&w.def.name)),
            ));
        }
        Ok(())
    }

    /// A new column's value in the existing rows: its default, evaluated
    /// per row (a sequence's next value) or once (a constant, now()).
    fn default_fill(&mut self, cd: &ColumnDef) -> Result<Expr> {
        let sequence = match &cd.sequence {
            None => None,
            Some((name, how)) => {
                let seq = self
                    .catalog
                    .table_by_name(name)
                    .filter(|s| s.sequence.is_some())
                    .ok_or_else(|| SqlError::new("42P01", format!("relation \"{name}\" does not exist")))?;
                Some((seq.id, *how))
            }
        };
        let col = Column {
            name: cd.name.clone(),
            ty: cd.ty,
            nullable: cd.nullable,
            default: cd.default.clone(),
            sequence,
            default_sql: cd.default_sql.clone(),
        };
        super::dml::column_default(&col)
    }

    fn drop_column(&mut self, w: &mut Work, i: usize, cascade: bool) -> Result<()> {
        let cname = w.def.columns[i].name.clone();
        if let Some(src) = w.sources[i] {
            let deps: Vec<Arc<pgtier_engine::ForeignKey>> = self
                .catalog
                .referencing(w.old.id)
                .into_iter()
                .filter(|fk| fk.child != w.old.id && fk.parent_columns.contains(&src))
                .collect();
            if let Some(fk) = deps.first()
                && !cascade
            {
                let child = self.catalog.table(fk.child).map_or_else(String::new, |t| t.name.clone());
                return Err(SqlError::new(
                    "2BP01",
                    format!(
                        "cannot drop column {cname} of table {} because other objects depend on it",
                        crate::names::short(&w.def.name)
                    ),
                )
                .with_detail(format!(
                    "constraint {} on table {child} depends on column {cname} of table {}",
                    fk.name, w.def.name
                ))
                .with_hint("Use DROP ... CASCADE to drop the dependent objects too."));
            }
            self.cascade(w, &deps);
        }
        if w.columns_left() == 1 {
            return Err(SqlError::unsupported("a table without columns"));
        }
        if w.def.primary_key.contains(&cname) {
            w.def.primary_key.clear();
            w.pkey_name = None;
        }
        w.def.unique.retain(|(_, cols)| !cols.contains(&cname));
        w.indexes.retain(|ix| !ix.columns.contains(&cname) && !ix.include.contains(&cname));
        let table = w.def.name.clone();
        w.def
            .foreign_keys
            .retain(|f| !(f.columns.contains(&cname) || f.parent_table == table && f.parent_columns.contains(&cname)));
        w.def.checks.retain(|c| !mentions(&c.sql, &cname));
        if let Some((seq, how)) = &w.def.columns[i].sequence
            && how.owns()
        {
            w.drop_sequences.push(seq.clone());
        }
        if let Some(src) = w.sources[i] {
            w.dropped_attnums.push(w.old.attnum(src).unsigned_abs());
        }
        w.def.columns.remove(i);
        w.sources.remove(i);
        w.fill.remove(i);
        Ok(())
    }

    fn alter_column(&mut self, w: &mut Work, cname: &str, op: &ast::AlterColumnOperation) -> Result<()> {
        use ast::AlterColumnOperation as C;
        let i = w.require_column(cname)?;
        let identity = matches!(
            w.def.columns[i].sequence,
            Some((_, SequenceDefault::IdentityAlways | SequenceDefault::IdentityByDefault))
        );
        let identity_error = || {
            SqlError::new(
                "42P16",
                format!(
                    "column \"{cname}\" of relation \"{}\" is an identity column",
                    crate::names::short(&w.def.name)
                ),
            )
            .with_hint("Use ALTER TABLE ... ALTER COLUMN ... DROP IDENTITY instead.")
        };
        match op {
            C::SetNotNull => w.def.columns[i].nullable = false,
            C::DropNotNull => {
                if w.def.primary_key.iter().any(|k| k == cname) {
                    return Err(SqlError::new("42P16", format!("column \"{cname}\" is in a primary key")));
                }
                if identity {
                    return Err(SqlError::new(
                        "42P16",
                        format!(
                            "column \"{cname}\" of relation \"{}\" is an identity column",
                            crate::names::short(&w.def.name)
                        ),
                    ));
                }
                w.def.columns[i].nullable = true;
            }
            C::SetDefault { value } => {
                if identity {
                    return Err(identity_error());
                }
                let mut cd = w.def.columns[i].clone();
                self.set_column_default(&mut cd, value)?;
                w.def.columns[i] = cd;
            }
            C::DropDefault => {
                if identity {
                    return Err(identity_error());
                }
                let cd = &mut w.def.columns[i];
                (cd.default, cd.sequence, cd.default_sql) = (None, None, None);
            }
            C::SetDataType { data_type, using, .. } => self.alter_type(w, i, data_type, using.as_ref())?,
            C::AddGenerated { .. } => return Err(SqlError::unsupported("ALTER COLUMN ... ADD GENERATED")),
        }
        Ok(())
    }

    /// ALTER COLUMN TYPE: the value converted by an assignment cast, or by
    /// USING (bound over the old row); the default converted too.
    fn alter_type(
        &mut self,
        w: &mut Work,
        i: usize,
        data_type: &ast::DataType,
        using: Option<&ast::Expr>,
    ) -> Result<()> {
        let cname = w.def.columns[i].name.clone();
        let to = self.column_type(data_type)?;
        if to == crate::value::NUMERIC_ANY {
            return Err(SqlError::unsupported("numeric column without precision"));
        }
        let Some(src) = w.sources[i] else {
            return Err(SqlError::unsupported("ALTER COLUMN TYPE of a column added in the same statement"));
        };
        let from = w.old.columns[src].ty;
        let cast_hint =
            format!("You might need to specify \"USING {}::{}\".", quote_ident(&cname), value::full_type_name(to));
        let converted = match using {
            Some(e) => {
                let scope = Scope {
                    rels: vec![Rel {
                        name: crate::names::short(&w.old.name).to_owned(),
                        table: Arc::clone(&w.old),
                        offset: 0,
                        source: None,
                    }],
                    hidden: Vec::new(),
                    star: Vec::new(),
                    merged: Vec::new(),
                    outer: None,
                };
                let (bound, ty) = self.expr(e, &scope, &mut ExprCtx::plain("transform expressions"))?;
                if bound.has_subquery() {
                    return Err(SqlError::unsupported("cannot use subquery in transform expression"));
                }
                if let Some(f) = ty
                    && check_assignable(f, to, &cname).is_err()
                {
                    return Err(SqlError::datatype_mismatch(format!(
                        "result of USING clause for column \"{cname}\" cannot be cast automatically to type {}",
                        value::full_type_name(to)
                    ))
                    .with_hint("You might need to add an explicit cast."));
                }
                self.assign(bound, ty, to, &cname)?
            }
            None if from == to => Expr::Column(src),
            None => {
                if check_assignable(from, to, &cname).is_err() {
                    return Err(SqlError::datatype_mismatch(format!(
                        "column \"{cname}\" cannot be cast automatically to type {}",
                        value::full_type_name(to)
                    ))
                    .with_hint(cast_hint));
                }
                self.assign(Expr::Column(src), Some(from), to, &cname)?
            }
        };
        let cd = &mut w.def.columns[i];
        if let Some(d) = cd.default.take() {
            let cast = check_assignable(from, to, &cname).and_then(|()| value::cast(d, to, false));
            cd.default = Some(cast.map_err(|_| {
                SqlError::datatype_mismatch(format!(
                    "default for column \"{cname}\" cannot be cast automatically to type {}",
                    value::full_type_name(to)
                ))
            })?);
        }
        if cd.default_sql.is_some()
            && !matches!(to, DataType::Timestamp(_) | DataType::TimestampTz(_) | DataType::Date | DataType::Uuid)
        {
            return Err(SqlError::datatype_mismatch(format!(
                "default for column \"{cname}\" cannot be cast automatically to type {}",
                type_name(to)
            )));
        }
        cd.ty = to;
        w.fill[i] = Some(converted);
        Ok(())
    }

    fn drop_constraint(&mut self, w: &mut Work, name: &str, if_exists: bool, cascade: bool) -> Result<()> {
        let referenced = |catalog: &Catalog, columns: &[String]| {
            let old_cols: Vec<usize> = columns.iter().filter_map(|c| w.column(c).and_then(|i| w.sources[i])).collect();
            catalog
                .referencing(w.old.id)
                .into_iter()
                .filter(|fk| fk.child != w.old.id && fk.parent_columns == old_cols)
                .collect::<Vec<_>>()
        };
        let depends = |fk_name: &str| {
            let e = SqlError::new(
                "2BP01",
                format!(
                    "cannot drop constraint {name} on table {} because other objects depend on it",
                    crate::names::short(&w.def.name)
                ),
            );
            e.with_hint("Use DROP ... CASCADE to drop the dependent objects too.")
                .with_detail(format!("constraint {fk_name} depends on index {name}"))
        };
        if w.pkey_name.as_deref() == Some(name) {
            let deps = referenced(self.catalog, &w.def.primary_key);
            if let Some(fk) = deps.first()
                && !cascade
            {
                return Err(depends(&fk.name));
            }
            self.cascade(w, &deps);
            w.def.primary_key.clear();
            w.pkey_name = None;
        } else if let Some(k) = w.def.unique.iter().position(|(n, _)| n.as_deref() == Some(name)) {
            let deps = referenced(self.catalog, &w.def.unique[k].1);
            if let Some(fk) = deps.first()
                && !cascade
            {
                return Err(depends(&fk.name));
            }
            self.cascade(w, &deps);
            w.def.unique.remove(k);
        } else if let Some(k) = w.def.foreign_keys.iter().position(|f| f.name.as_deref() == Some(name)) {
            w.def.foreign_keys.remove(k);
        } else if let Some(k) = w.def.checks.iter().position(|c| c.name == name) {
            w.def.checks.remove(k);
        } else if if_exists {
            w.notices.push(SqlNotice {
                sqlstate: "00000",
                message: format!(
                    "constraint \"{name}\" of relation \"{}\" does not exist, skipping",
                    crate::names::short(&w.def.name)
                ),
            });
        } else {
            return Err(SqlError::new(
                "42704",
                format!("constraint \"{name}\" of relation \"{}\" does not exist", crate::names::short(&w.def.name)),
            ));
        }
        Ok(())
    }

    /// CASCADE: other tables' foreign keys `deps` go first (PostgreSQL's
    /// "drop cascades to constraint ..." notice).
    fn cascade(&mut self, w: &mut Work, deps: &[Arc<pgtier_engine::ForeignKey>]) {
        for fk in deps {
            let Some(child) = self.catalog.table(fk.child).cloned() else { continue };
            w.notices.push(SqlNotice {
                sqlstate: "00000",
                message: format!("drop cascades to constraint {} on table {}", fk.name, child.name),
            });
            if !self.deps.iter().any(|d| Arc::ptr_eq(d, &child)) {
                self.deps.push(Arc::clone(&child));
            }
            w.cascade_fks.push((child, fk.name.clone()));
        }
    }

    /// The ALTERs of other tables that drop the foreign keys CASCADE takes
    /// with it, one per table.
    fn cascaded(&mut self, w: &mut Work) -> Result<Vec<AlterPlan>> {
        let mut out = Vec::new();
        let mut pending = std::mem::take(&mut w.cascade_fks);
        while let Some((child, _)) = pending.first().cloned() {
            let names: Vec<String> = pending.iter().filter(|(t, _)| t.id == child.id).map(|(_, n)| n.clone()).collect();
            pending.retain(|(t, _)| t.id != child.id);
            let mut cw = self.work(&child)?;
            cw.def.foreign_keys.retain(|f| !f.name.as_ref().is_some_and(|n| names.contains(n)));
            if let Plan::AlterTable(p) = self.finish_alter(cw, "ALTER TABLE")? {
                out.push(*p);
            }
        }
        Ok(out)
    }

    fn finish_alter(&mut self, mut w: Work, tag: &'static str) -> Result<Plan> {
        let before = self.cascaded(&mut w)?;
        let pending = std::mem::take(&mut w.pending_checks);
        let existing = w.def.checks.clone();
        let added = self.name_checks(&w.def, pending, &existing)?;
        w.def.checks.extend(added);
        for k in w.def.primary_key.clone() {
            let i = w.require_column(&k)?;
            w.def.columns[i].nullable = false;
        }
        let fill: Vec<Expr> = w
            .fill
            .iter()
            .zip(&w.sources)
            .map(|(f, s)| f.clone().unwrap_or_else(|| Expr::Column(s.unwrap_or(0))))
            .collect();
        let columns: Vec<Column> = w
            .def
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
        let mut shape = TableSchema::detached(w.def.name.clone(), columns);
        shape.checks.clone_from(&w.def.checks);
        let checks = self.own_checks(&Arc::new(shape))?;
        for i in &mut w.indexes {
            i.table.clone_from(&w.def.name);
            // A column whose type changed must still suit its key's class.
            for (column, key) in i.columns.iter().zip(&i.options.keys) {
                if let (Some(opclass), Some(c)) = (&key.opclass, w.def.columns.iter().find(|c| c.name == *column)) {
                    super::ddl::opclass_accepts(opclass, c.ty)?;
                }
            }
        }
        let alter = AlterTableDef {
            def: w.def,
            indexes: w.indexes,
            sources: w.sources,
            primary_key_name: w.pkey_name,
            dropped_attnums: w.dropped_attnums,
        };
        Ok(Plan::AlterTable(Box::new(AlterPlan {
            before,
            table: Some(w.old),
            alter,
            fill,
            checks,
            drop_sequences: w.drop_sequences,
            notices: w.notices,
            tag,
        })))
    }
}

impl Work {
    fn columns_left(&self) -> usize {
        self.def.columns.len()
    }
}

/// RENAME COLUMN: the name changes wherever the definition refers to it,
/// CHECK expressions included.
fn rename_column(w: &mut Work, i: usize, new: &str) {
    let old = std::mem::replace(&mut w.def.columns[i].name, new.to_owned());
    let rename = |cols: &mut Vec<String>| {
        for c in cols.iter_mut().filter(|c| **c == old) {
            *c = new.to_owned();
        }
    };
    rename(&mut w.def.primary_key);
    for (_, cols) in &mut w.def.unique {
        rename(cols);
    }
    for ix in &mut w.indexes {
        rename(&mut ix.columns);
        rename(&mut ix.include);
    }
    let table = w.def.name.clone();
    for fk in &mut w.def.foreign_keys {
        rename(&mut fk.columns);
        if fk.parent_table == table {
            rename(&mut fk.parent_columns);
        }
    }
    for c in &mut w.def.checks {
        *c = CheckDef { name: c.name.clone(), sql: rename_in_sql(&c.sql, &old, new) };
    }
}

/// The identifiers of an SQL expression's text, folded as PostgreSQL folds
/// them, with whether each is a function name (followed by `(`).
fn words(sql: &str) -> Vec<(Token, Option<(String, bool)>)> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql).tokenize().unwrap_or_default();
    let mut out = Vec::with_capacity(tokens.len());
    for (k, t) in tokens.iter().enumerate() {
        let word = match t {
            Token::Word(w) => {
                let name = if w.quote_style.is_some() { w.value.clone() } else { w.value.to_lowercase() };
                let call = tokens[k + 1..]
                    .iter()
                    .find(|t| !matches!(t, Token::Whitespace(_)))
                    .is_some_and(|t| *t == Token::LParen);
                Some((name, call))
            }
            _ => None,
        };
        out.push((t.clone(), word));
    }
    out
}

/// The expression reads column `column`.
fn mentions(sql: &str, column: &str) -> bool {
    words(sql).iter().any(|(_, w)| w.as_ref().is_some_and(|(n, call)| n == column && !call))
}

fn rename_in_sql(sql: &str, old: &str, new: &str) -> String {
    words(sql)
        .into_iter()
        .map(|(t, w)| match w {
            Some((n, false)) if n == old => quote_ident(new),
            _ => t.to_string(),
        })
        .collect()
}

impl AlterPlan {
    /// ALTER TABLE IF EXISTS of a table that does not exist.
    pub(crate) fn skipped(notice: SqlNotice) -> AlterPlan {
        AlterPlan {
            before: Vec::new(),
            table: None,
            alter: AlterTableDef {
                def: TableDef::new(String::new(), Vec::new(), &[]),
                indexes: Vec::new(),
                sources: Vec::new(),
                primary_key_name: None,
                dropped_attnums: Vec::new(),
            },
            fill: Vec::new(),
            checks: Vec::new(),
            drop_sequences: Vec::new(),
            notices: vec![notice],
            tag: "ALTER TABLE",
        }
    }
}

/// RENAME COLUMN old TO new.
fn rename_column_to(w: &mut Work, old_column_name: &ast::Ident, new_column_name: &ast::Ident) -> Result<()> {
    let (old, new) = (ident(old_column_name), ident(new_column_name));
    let i = w.column(&old).ok_or_else(|| SqlError::new("42703", format!("column \"{old}\" does not exist")))?;
    if w.column(&new).is_some() {
        return Err(SqlError::new(
            "42701",
            format!("column \"{new}\" of relation \"{}\" already exists", crate::names::short(&w.def.name)),
        ));
    }
    rename_column(w, i, &new);
    Ok(())
}

/// DROP COLUMN of a column partitioned table `t`'s key uses: PostgreSQL's
/// 42P16 for a key column, 0A000 when a key expression's text names it
/// (pgtier keeps the expression as text, not its columns).
fn refuse_key_drop(
    t: &TableSchema,
    spec: &crate::catalog::partitions::PartitionSpec,
    columns: &[ast::Ident],
) -> Result<()> {
    for c in columns.iter().map(ident) {
        if spec.key.contains(&c) {
            return Err(SqlError::new(
                "42P16",
                format!(
                    "cannot drop column \"{c}\" because it is part of the partition key of relation \"{}\"",
                    crate::names::short(&t.name)
                ),
            ));
        }
        let named = |k: &String| {
            crate::catalog::partitions::key_expr(k).is_some_and(|(_, sql)| sql.to_lowercase().contains(&c))
        };
        if spec.key.iter().any(named) {
            return Err(SqlError::unsupported("DROP COLUMN of a column a partition key expression may use"));
        }
    }
    Ok(())
}
