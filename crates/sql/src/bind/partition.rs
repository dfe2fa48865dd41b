//! Declarative partitioning (PostgreSQL 10+) in the binder: CREATE TABLE
//! ... PARTITION BY and ... PARTITION OF, each partition's constraint
//! (its bound, and its ancestors'), tuple routing of an INSERT into a
//! partitioned table, UPDATE and DELETE of one partition by partition, and
//! a partitioned table in FROM as the UNION ALL of its partitions. How it
//! is stored: catalog/partitions.rs.

use std::sync::Arc;

use pgtier_engine::{ColumnDef, DataType, SequenceDefault, TableDef, TableSchema, Value};
use sqlparser::ast;

use super::{Binder, ident};
use crate::catalog::partitions::{
    Bound, KEY_EXPR, PARTITION_CHECK, PARTITION_MOVE, PARTITIONED_READ, Partition, PartitionSpec, RangeDatum, Strategy,
    cmp_bound, is_partitioned, key_expr, key_expr_entry, key_text, leaves, parent_of,
};
use crate::dialect::PartitionCommand;
use crate::error::{Result, SqlError};
use crate::expr::{CmpOp, Expr};
use crate::plan::{BoundCheck, PartitionRoute, Plan, RouteTarget, SetTree, VirtualSource};

/// Key column types whose order and equality pgtier's comparison gives as
/// PostgreSQL's btree operator class does.
fn key_type_ok(ty: DataType) -> bool {
    matches!(
        ty,
        DataType::Int2
            | DataType::Int4
            | DataType::Int8
            | DataType::Numeric { .. }
            | DataType::Text
            | DataType::Varchar(_)
            | DataType::Date
            | DataType::Timestamp(_)
            | DataType::TimestampTz(_)
            | DataType::Bool
            | DataType::Uuid
    )
}

fn cmp(op: CmpOp, key: &Expr, v: &Value) -> Expr {
    Expr::Cmp(op, Box::new(key.clone()), Box::new(Expr::Const(v.clone())))
}

/// `key >= lower` (lexicographic, PostgreSQL's MINVALUE/MAXVALUE rules) from datum `i` on.
fn lower_pred(key: &[Expr], lo: &[RangeDatum], i: usize) -> Expr {
    match (key.get(i), lo.get(i)) {
        (Some(k), Some(RangeDatum::Value(v))) if i + 1 < key.len() => {
            Expr::Or(vec![cmp(CmpOp::Gt, k, v), Expr::And(vec![cmp(CmpOp::Eq, k, v), lower_pred(key, lo, i + 1)])])
        }
        (Some(k), Some(RangeDatum::Value(v))) => cmp(CmpOp::GtEq, k, v),
        (_, Some(RangeDatum::MaxValue)) => Expr::Const(Value::Bool(false)),
        _ => Expr::Const(Value::Bool(true)),
    }
}

/// `key < upper` from datum `i` on.
fn upper_pred(key: &[Expr], hi: &[RangeDatum], i: usize) -> Expr {
    match (key.get(i), hi.get(i)) {
        (Some(k), Some(RangeDatum::Value(v))) if i + 1 < key.len() => {
            Expr::Or(vec![cmp(CmpOp::Lt, k, v), Expr::And(vec![cmp(CmpOp::Eq, k, v), upper_pred(key, hi, i + 1)])])
        }
        (Some(k), Some(RangeDatum::Value(v))) => cmp(CmpOp::Lt, k, v),
        (_, Some(RangeDatum::MaxValue)) => Expr::Const(Value::Bool(true)),
        _ => Expr::Const(Value::Bool(false)),
    }
}

/// The rows a bound takes, `key` its key over the row of the partitioned
/// table (and of any partition: they have its columns); None for DEFAULT.
pub(super) fn bound_pred(key: &[Expr], bound: &Bound) -> Option<Expr> {
    Some(match bound {
        Bound::Default => return None,
        Bound::Range(lo, hi) => {
            let mut all: Vec<Expr> = key.iter().map(|k| Expr::IsNull(Box::new(k.clone()), true)).collect();
            all.push(lower_pred(key, lo, 0));
            all.push(upper_pred(key, hi, 0));
            Expr::And(all)
        }
        Bound::List(vals) => {
            let k = Box::new(key.first().cloned().unwrap_or(Expr::Const(Value::Null)));
            let list: Vec<Expr> = vals.iter().filter(|v| !v.is_null()).map(|v| Expr::Const(v.clone())).collect();
            let has_null = vals.iter().any(Value::is_null);
            let within = Expr::InList { expr: k.clone(), list, negated: false };
            match (has_null, vals.len()) {
                (true, 1) => Expr::IsNull(k, false),
                (true, _) => Expr::Or(vec![Expr::IsNull(k, false), within]),
                (false, _) => Expr::And(vec![Expr::IsNull(k, true), within]),
            }
        }
    })
}

/// The constraint of partition `k` of `spec`: its bound, or for the
/// default partition, no other partition's.
fn partition_pred(spec: &PartitionSpec, key: &[Expr], k: usize) -> Expr {
    let Some(p) = spec.partitions.get(k) else { return Expr::Const(Value::Bool(true)) };
    bound_pred(key, &p.bound).unwrap_or_else(|| {
        let others: Vec<Expr> = spec.partitions.iter().filter_map(|o| bound_pred(key, &o.bound)).collect();
        if others.is_empty() {
            return Expr::Const(Value::Bool(true));
        }
        Expr::Not(Box::new(Expr::Coalesce(vec![Expr::Or(others), Expr::Const(Value::Bool(false))])))
    })
}

fn datum_text(d: &RangeDatum) -> String {
    match d {
        RangeDatum::MinValue => "MINVALUE".to_owned(),
        RangeDatum::MaxValue => "MAXVALUE".to_owned(),
        RangeDatum::Value(v) => crate::value::to_text(v),
    }
}

fn object_name(stored: &str) -> ast::ObjectName {
    let (schema, name) = crate::names::split(stored);
    ast::ObjectName::from(vec![ast::Ident::with_quote('"', schema), ast::Ident::with_quote('"', name)])
}

impl Binder<'_> {
    fn depend(&mut self, t: &Arc<TableSchema>) {
        if !self.deps.iter().any(|d| Arc::ptr_eq(d, t)) {
            self.deps.push(Arc::clone(t));
        }
    }

    /// PARTITION BY of CREATE TABLE `def` (columns and constraints made):
    /// the key, stored in the table's annotation.
    pub(super) fn partition_by(&mut self, e: &ast::Expr, def: &mut TableDef) -> Result<()> {
        let ast::Expr::Function(f) = e else {
            return Err(SqlError::syntax(format!("syntax error at or near \"{e}\"")));
        };
        let strategy =
            match ident(f.name.0.last().and_then(|p| p.as_ident()).ok_or_else(|| SqlError::syntax("PARTITION BY"))?)
                .as_str()
            {
                "range" => Strategy::Range,
                "list" => Strategy::List,
                "hash" => return Err(SqlError::unsupported("PARTITION BY HASH")),
                other => return Err(SqlError::new("22023", format!("unrecognized partitioning strategy \"{other}\""))),
            };
        let ast::FunctionArguments::List(args) = &f.args else {
            return Err(SqlError::syntax("PARTITION BY needs a column list"));
        };
        let mut key: Vec<String> = Vec::new();
        for a in &args.args {
            let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) = a else {
                return Err(SqlError::syntax("PARTITION BY needs a column list"));
            };
            let name = self.key_entry(e, def)?;
            if key.contains(&name) && key_expr(&name).is_none() {
                return Err(SqlError::new(
                    "42701",
                    format!("column \"{name}\" appears more than once in partition key"),
                ));
            }
            key.push(name);
        }
        if key.iter().any(|k| key_expr(k).is_some()) && (!def.primary_key.is_empty() || !def.unique.is_empty()) {
            return Err(SqlError::unsupported(
                "unsupported PRIMARY KEY or UNIQUE constraint with partition key definition",
            )
            .with_detail("PRIMARY KEY or UNIQUE constraints cannot be used when partition keys include expressions."));
        }
        if strategy == Strategy::List && key.len() > 1 {
            return Err(SqlError::new("42P16", "cannot use \"list\" partition strategy with more than one column"));
        }
        let table = crate::names::short(&def.name).to_owned();
        let pk = std::iter::once(("PRIMARY KEY", &def.primary_key)).filter(|(_, k)| !k.is_empty());
        for (kind, cols) in pk.chain(def.unique.iter().map(|(_, cols)| ("UNIQUE", cols))) {
            if let Some(missing) = key.iter().find(|k| !cols.contains(k)) {
                return Err(SqlError::unsupported("unique constraint on partitioned table must include all partitioning columns")
                    .with_detail(format!("{kind} constraint on table \"{table}\" lacks column \"{missing}\" which is part of the partition key.")));
            }
        }
        if !def.foreign_keys.is_empty() {
            return Err(SqlError::unsupported("foreign keys on a partitioned table"));
        }
        if def.columns.iter().any(|c| {
            matches!(c.sequence, Some((_, SequenceDefault::IdentityAlways | SequenceDefault::IdentityByDefault)))
        }) {
            return Err(SqlError::unsupported("identity columns of a partitioned table"));
        }
        def.annotation = Some(PartitionSpec { strategy, key, partitions: Vec::new() }.encode());
        Ok(())
    }

    /// One element of PARTITION BY: a column's name, or the stored form
    /// of an expression over the columns of `def` (a function of columns
    /// and constants, or one arithmetic operator between them: the forms
    /// whose text PostgreSQL prints back as written).
    fn key_entry(&mut self, e: &ast::Expr, def: &TableDef) -> Result<String> {
        let inner = match e {
            ast::Expr::Nested(x) => x.as_ref(),
            other => other,
        };
        if let ast::Expr::Identifier(id) = inner {
            let name = ident(id);
            let Some(c) = def.columns.iter().find(|c| c.name == name) else {
                return Err(SqlError::new("42703", format!("column \"{name}\" named in partition key does not exist")));
            };
            if !key_type_ok(c.ty) || name.starts_with(KEY_EXPR) {
                return Err(SqlError::unsupported(format!(
                    "a partition key of type {}",
                    crate::value::type_name(c.ty)
                )));
            }
            return Ok(name);
        }
        let operand = |x: &ast::Expr| matches!(x, ast::Expr::Identifier(_) | ast::Expr::Value(_));
        let simple = match inner {
            ast::Expr::BinaryOp { left, op, right } => {
                matches!(e, ast::Expr::Nested(_))
                    && matches!(
                        op,
                        ast::BinaryOperator::Plus | ast::BinaryOperator::Minus | ast::BinaryOperator::Multiply
                    )
                    && operand(left)
                    && operand(right)
            }
            ast::Expr::Function(f) => match &f.args {
                ast::FunctionArguments::List(l) => {
                    l.duplicate_treatment.is_none()
                        && l.clauses.is_empty()
                        && f.filter.is_none()
                        && f.over.is_none()
                        && l.args.iter().all(
                            |a| matches!(a, ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) if operand(x)),
                        )
                }
                _ => false,
            },
            _ => false,
        };
        let sql = inner.to_string();
        if !simple || !sql.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || " _+-*(),".contains(c)) {
            return Err(SqlError::unsupported("this partition key expression"));
        }
        let cols = def.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
        let table = super::detached(crate::names::short(&def.name), cols);
        let (x, ty) = self.bind_over(inner, &table, 0)?;
        if !super::expr::has_vars(&x) {
            return Err(SqlError::new("42P17", "cannot use constant expression as partition key"));
        }
        let ty = ty.unwrap_or(DataType::Text);
        key_expr_entry(&sql, ty)
            .filter(|_| key_type_ok(ty))
            .ok_or_else(|| SqlError::unsupported(format!("a partition key of type {}", crate::value::type_name(ty))))
    }

    /// `e` bound over a row of `t` read at `offset` of the row.
    fn bind_over(&mut self, e: &ast::Expr, t: &Arc<TableSchema>, offset: usize) -> Result<(Expr, super::Ty)> {
        let rel = crate::plan::Rel {
            name: crate::names::short(&t.name).to_owned(),
            table: Arc::clone(t),
            offset,
            source: None,
        };
        let scope =
            super::Scope { rels: vec![rel], hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer: None };
        self.expr(e, &scope, &mut super::ExprCtx::plain("partition key expressions"))
    }

    /// The key of `spec` over a row of `t` (the partitioned table or one
    /// with its column names) read at `offset`.
    pub(super) fn key_exprs(&mut self, spec: &PartitionSpec, t: &Arc<TableSchema>, offset: usize) -> Result<Vec<Expr>> {
        let mut out = Vec::with_capacity(spec.key.len());
        for k in &spec.key {
            out.push(match key_expr(k) {
                Some((_, sql)) => {
                    let e = match crate::parse::parse_sql(&format!("SELECT {sql}"))?.pop() {
                        Some(ast::Statement::Query(q)) => match *q.body {
                            ast::SetExpr::Select(sel) => match sel.projection.into_iter().next() {
                                Some(ast::SelectItem::UnnamedExpr(e)) => e,
                                _ => return Err(SqlError::new("XX000", "a stored partition key is not an expression")),
                            },
                            _ => return Err(SqlError::new("XX000", "a stored partition key is not an expression")),
                        },
                        _ => return Err(SqlError::new("XX000", "a stored partition key is not an expression")),
                    };
                    self.bind_over(&e, t, offset)?.0
                }
                None => Expr::Column(
                    t.column_index(k)
                        .ok_or_else(|| SqlError::new("XX000", format!("partition key column \"{k}\" is gone")))?
                        + offset,
                ),
            });
        }
        Ok(out)
    }

    /// CREATE TABLE name PARTITION OF parent FOR VALUES ... | DEFAULT
    /// [PARTITION BY ...]: the parent's columns, keys and CHECKs.
    pub(super) fn create_partition(&mut self, c: &ast::CreateTable, of: &ast::ObjectName) -> Result<Plan> {
        if self.creating_temp {
            return Err(SqlError::unsupported("temporary partitions"));
        }
        if !c.columns.is_empty() || !c.constraints.is_empty() {
            return Err(SqlError::unsupported("column definitions or constraints in PARTITION OF"));
        }
        let parent = self.relation(of)?;
        let Some(spec) = PartitionSpec::decode(&parent) else {
            return Err(SqlError::new(
                "42809",
                format!("\"{}\" is not partitioned", crate::names::short(&parent.name)),
            ));
        };
        let name = self.new_relation_key(&c.name)?;
        let mut def = TableDef::new(name.clone(), self.partition_columns(&parent)?, &[]);
        if !parent.has_rowid() {
            def.primary_key =
                parent.primary_key.iter().filter_map(|&i| parent.columns.get(i)).map(|c| c.name.clone()).collect();
        }
        for index in self.catalog.indexes_of(parent.id) {
            if index.unique && !index.primary {
                let cols =
                    index.columns.iter().filter_map(|&i| parent.columns.get(i)).map(|c| c.name.clone()).collect();
                def.unique.push((None, cols));
            }
        }
        def.checks = parent.checks.clone();
        if let Some(e) = &c.partition_by {
            self.partition_by(e, &mut def)?;
        }
        let for_values =
            c.for_values.as_ref().ok_or_else(|| SqlError::syntax("PARTITION OF needs FOR VALUES or DEFAULT"))?;
        let bound = self.partition_bound(for_values, &spec, &parent, &name)?;
        spec.check_new(&name, &bound)?;
        let key = self.key_exprs(&spec, &parent, 0)?;
        let (guard, default_name) = self.default_guard(&spec, &bound);
        refuse_reordered(&parent, &guard)?;
        let guard_bound = bound_pred(&key, &bound);
        let create =
            Plan::CreateTable { def, if_not_exists: c.if_not_exists, sequences: Vec::new(), indexes: Vec::new() };
        Ok(Plan::CreatePartition {
            create: Box::new(create),
            parent: parent.name.clone(),
            partition: Partition { name, bound },
            guard,
            guard_bound,
            default_name,
        })
    }

    /// The default partition's tables whose rows a new `bound` must not
    /// take, and the default partition's name (none for a DEFAULT bound).
    fn default_guard(&self, spec: &PartitionSpec, bound: &Bound) -> (Vec<Arc<TableSchema>>, String) {
        let default = spec.partitions.iter().find(|p| p.bound == Bound::Default);
        match default.and_then(|d| self.catalog.table_by_name(&d.name).cloned()) {
            Some(d) if *bound != Bound::Default => {
                let guard = if is_partitioned(&d) { leaves(self.catalog, &d) } else { vec![d.clone()] };
                (guard, d.name.clone())
            }
            _ => (Vec::new(), String::new()),
        }
    }

    /// ALTER TABLE parent ATTACH PARTITION name FOR VALUES ... | DEFAULT,
    /// and DETACH PARTITION name (parsed by the dialect as a CREATE TABLE
    /// name PARTITION OF parent).
    pub(super) fn partition_command(&mut self, c: &ast::CreateTable, command: PartitionCommand) -> Result<Plan> {
        let of = c.partition_of.as_ref().ok_or_else(|| SqlError::syntax("ATTACH / DETACH PARTITION"))?;
        let parent = self.relation(of)?;
        self.need_owner(&parent);
        let Some(spec) = PartitionSpec::decode(&parent) else {
            let short = crate::names::short(&parent.name);
            return Err(SqlError::new("42809", format!("table \"{short}\" is not partitioned")));
        };
        let table = self.relation(&c.name)?;
        self.need_owner(&table);
        if command == PartitionCommand::Detach {
            if c.for_values == Some(ast::ForValues::Default) {
                return Err(SqlError::unsupported("DETACH PARTITION CONCURRENTLY / FINALIZE"));
            }
            if !spec.partitions.iter().any(|p| p.name == table.name) {
                return Err(SqlError::new(
                    "42P01",
                    format!(
                        "relation \"{}\" is not a partition of relation \"{}\"",
                        crate::names::short(&table.name),
                        crate::names::short(&parent.name)
                    ),
                ));
            }
            return Ok(Plan::DetachPartition { parent: parent.name.clone(), name: table.name.clone() });
        }
        if table.sequence.is_some() || crate::catalog::is_view(&table) {
            return Err(SqlError::unsupported("ATTACH PARTITION of anything but a table"));
        }
        if parent_of(self.catalog, &table.name).is_some() {
            return Err(SqlError::new(
                "42809",
                format!("\"{}\" is already a partition", crate::names::short(&table.name)),
            ));
        }
        let mut root = Arc::clone(&parent);
        while let Some((up, _, _)) = parent_of(self.catalog, &root.name) {
            root = up;
        }
        if root.name == table.name {
            return Err(SqlError::new("42P07", "circular inheritance not allowed").with_detail(format!(
                "\"{}\" is already a child of \"{}\".",
                crate::names::short(&parent.name),
                crate::names::short(&table.name)
            )));
        }
        self.same_shape(&parent, &table)?;
        let for_values = c.for_values.as_ref().ok_or_else(|| SqlError::syntax("ATTACH PARTITION needs FOR VALUES"))?;
        let bound = self.partition_bound(for_values, &spec, &parent, &table.name)?;
        spec.check_new(&table.name, &bound)?;
        // The checks read the attached table's rows (a partitioned one's
        // partitions', each over its own row), the guard the default partition's.
        let mut with = spec.clone();
        with.partitions.push(Partition { name: table.name.clone(), bound: bound.clone() });
        let holding = if is_partitioned(&table) { leaves(self.catalog, &table) } else { vec![Arc::clone(&table)] };
        let mut checks = Vec::with_capacity(holding.len());
        for t in holding {
            let key = self.key_exprs(&spec, &t, 0)?;
            let own = partition_pred(&with, &key, with.partitions.len() - 1);
            let check = match self.partition_constraint(&parent, &t)? {
                Some(up) => Expr::And(vec![up, own]),
                None => own,
            };
            checks.push((t, check));
        }
        let (guard, default_name) = self.default_guard(&spec, &bound);
        refuse_reordered(&parent, &guard)?;
        let guard_bound = bound_pred(&self.key_exprs(&spec, &parent, 0)?, &bound);
        let partition = Partition { name: table.name.clone(), bound };
        Ok(Plan::AttachPartition { checks, parent: parent.name.clone(), partition, guard, guard_bound, default_name })
    }

    /// A table to attach has the partitioned table's columns in its order
    /// (routing writes the partitioned table's row), its keys and CHECKs.
    fn same_shape(&self, parent: &TableSchema, table: &TableSchema) -> Result<()> {
        let short = crate::names::short(&table.name);
        let (pc, tc) = (parent.visible_columns(), table.visible_columns());
        for c in tc {
            if !pc.iter().any(|p| p.name == c.name) {
                return Err(SqlError::new(
                    "42804",
                    format!(
                        "table \"{short}\" contains column \"{}\" not found in parent \"{}\"",
                        c.name,
                        crate::names::short(&parent.name)
                    ),
                )
                .with_detail("The new partition may contain only the columns present in parent."));
            }
        }
        for p in pc {
            let Some(c) = tc.iter().find(|c| c.name == p.name) else {
                return Err(SqlError::new("42804", format!("child table is missing column \"{}\"", p.name)));
            };
            if c.ty != p.ty {
                return Err(SqlError::new(
                    "42804",
                    format!("child table \"{short}\" has different type for column \"{}\"", p.name),
                ));
            }
            if !p.nullable && c.nullable {
                return Err(SqlError::new(
                    "42804",
                    format!("column \"{}\" in child table must be marked NOT NULL", p.name),
                ));
            }
        }
        let names = |t: &TableSchema, cols: &[usize]| -> Vec<String> {
            cols.iter().filter_map(|&i| t.columns.get(i)).map(|c| c.name.clone()).collect()
        };
        let keys = |t: &TableSchema| -> Vec<Vec<String>> {
            let mut k: Vec<Vec<String>> =
                self.catalog.indexes_of(t.id).iter().filter(|i| i.unique).map(|i| names(t, &i.columns)).collect();
            k.sort();
            k
        };
        if parent.has_rowid() != table.has_rowid()
            || parent.columns.len() != table.columns.len()
            || names(parent, &parent.primary_key) != names(table, &table.primary_key)
            || keys(parent) != keys(table)
            || parent.checks.iter().any(|k| !table.checks.contains(k))
        {
            return Err(SqlError::unsupported(
                "ATTACH PARTITION of a table whose keys or CHECK constraints differ from the partitioned table's",
            ));
        }
        Ok(())
    }

    /// A partition's columns: the parent's, with their defaults.
    fn partition_columns(&self, parent: &TableSchema) -> Result<Vec<ColumnDef>> {
        let mut columns = Vec::new();
        for col in parent.visible_columns() {
            let mut cd = ColumnDef::new(col.name.clone(), col.ty);
            cd.nullable = col.nullable;
            cd.default = col.default.clone();
            cd.default_sql = col.default_sql.clone();
            if let Some((seq_id, _)) = col.sequence {
                let seq =
                    self.catalog.table(seq_id).ok_or_else(|| SqlError::new("XX000", "a default's sequence is gone"))?;
                cd.sequence = Some((seq.name.clone(), SequenceDefault::Nextval));
            }
            columns.push(cd);
        }
        Ok(columns)
    }

    /// FOR VALUES ... of a partition of `parent`, its values cast to the key's types.
    fn partition_bound(
        &mut self,
        fv: &ast::ForValues,
        spec: &PartitionSpec,
        parent: &TableSchema,
        name: &str,
    ) -> Result<Bound> {
        let names: Vec<String> = spec.key.iter().map(|k| key_text(k, false)).collect();
        let key: Vec<(&str, DataType)> = names.iter().map(String::as_str).zip(spec.key_types(parent)).collect();
        match (spec.strategy, fv) {
            (_, ast::ForValues::Default) => Ok(Bound::Default),
            (Strategy::List, ast::ForValues::In(vals)) => {
                let (cname, ty) =
                    key.first().copied().ok_or_else(|| SqlError::new("XX000", "a partition key without columns"))?;
                let mut out: Vec<Value> = Vec::new();
                for e in vals {
                    let v = self.bound_value(e, ty, cname)?;
                    if !out.iter().any(|o| o == &v) {
                        out.push(v);
                    }
                }
                Ok(Bound::List(out))
            }
            (Strategy::Range, ast::ForValues::From { from, to }) => {
                let lo = self.range_datums(from, &key, "FROM")?;
                let hi = self.range_datums(to, &key, "TO")?;
                if cmp_bound(&lo, &hi) != std::cmp::Ordering::Less {
                    let text = |ds: &[RangeDatum]| ds.iter().map(datum_text).collect::<Vec<_>>().join(", ");
                    return Err(SqlError::new(
                        "42P17",
                        format!("empty range bound specified for partition \"{}\"", crate::names::short(name)),
                    )
                    .with_detail(format!(
                        "Specified lower bound ({}) is greater than or equal to upper bound ({}).",
                        text(&lo),
                        text(&hi)
                    )));
                }
                Ok(Bound::Range(lo, hi))
            }
            (s, _) => Err(SqlError::new(
                "42P16",
                format!("invalid bound specification for a {} partition", s.keyword().to_lowercase()),
            )),
        }
    }

    fn range_datums(
        &mut self,
        vals: &[ast::PartitionBoundValue],
        key: &[(&str, DataType)],
        which: &str,
    ) -> Result<Vec<RangeDatum>> {
        if vals.len() != key.len() {
            return Err(SqlError::new(
                "42P16",
                format!("{which} must specify exactly one value per partitioning column"),
            ));
        }
        let mut out = Vec::new();
        for (v, (cname, ty)) in vals.iter().zip(key) {
            let d = match v {
                ast::PartitionBoundValue::MinValue => RangeDatum::MinValue,
                ast::PartitionBoundValue::MaxValue => RangeDatum::MaxValue,
                ast::PartitionBoundValue::Expr(e) => match self.bound_value(e, *ty, cname)? {
                    Value::Null => return Err(SqlError::new("42P16", "cannot specify NULL in range bound")),
                    v => RangeDatum::Value(v),
                },
            };
            if let Some(prev @ (RangeDatum::MinValue | RangeDatum::MaxValue)) = out.last()
                && *prev != d
            {
                let word = if *prev == RangeDatum::MinValue { "MINVALUE" } else { "MAXVALUE" };
                return Err(SqlError::new("42P16", format!("every bound following {word} must also be {word}")));
            }
            out.push(d);
        }
        Ok(out)
    }

    fn bound_value(&mut self, e: &ast::Expr, ty: DataType, column: &str) -> Result<Value> {
        if matches!(e, ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)) {
            return Err(SqlError::new("42P16", "cannot use column reference in partition bound expression"));
        }
        let v = self.constant_default(e, ty, column)?;
        if let Value::Text(s) = &v
            && s.contains('\x1f')
        {
            return Err(SqlError::unsupported("a partition bound holding the byte 0x1f"));
        }
        Ok(v)
    }

    /// The partition constraint of `table` (its bound, and its ancestors'),
    /// None when it is not a partition, over a row of `shape` (`table`, or
    /// a table with its column names). The partitioned tables it reads
    /// become dependencies: a new partition changes a default's constraint.
    pub(super) fn partition_constraint(
        &mut self,
        table: &TableSchema,
        shape: &Arc<TableSchema>,
    ) -> Result<Option<Expr>> {
        let Some((parent, spec, k)) = parent_of(self.catalog, &table.name) else { return Ok(None) };
        self.depend(&parent);
        let key = self.key_exprs(&spec, shape, 0)?;
        let own = partition_pred(&spec, &key, k);
        Ok(Some(match self.partition_constraint(&parent, shape)? {
            Some(up) => Expr::And(vec![up, own]),
            None => own,
        }))
    }

    /// The partition constraint of `table` as a check, named for how the
    /// statement reached it.
    pub(super) fn partition_check(&mut self, table: &Arc<TableSchema>) -> Result<Option<BoundCheck>> {
        let name = if self.partition_fanout { PARTITION_MOVE } else { PARTITION_CHECK };
        Ok(self.partition_constraint(table, table)?.map(|expr| BoundCheck { name: name.to_owned(), expr }))
    }

    /// An UPDATE's checks: the partition constraint first (PostgreSQL
    /// looks whether the row leaves its partition before its CHECKs).
    pub(super) fn update_checks(&mut self, table: &Arc<TableSchema>) -> Result<Vec<BoundCheck>> {
        let mut out: Vec<BoundCheck> = self.partition_check(table)?.into_iter().collect();
        out.extend(self.own_checks(table)?);
        Ok(out)
    }

    /// Tuple routing for an INSERT into partitioned table `t`.
    pub(super) fn partition_route(&mut self, t: &Arc<TableSchema>) -> Result<PartitionRoute> {
        self.route_over(t, t)
    }

    /// Tuple routing of partitioned table `t` for rows of `shape` (the
    /// INSERT's target: `t` or an ancestor); a partition whose columns
    /// are in another order gets the row rearranged by name.
    fn route_over(&mut self, t: &Arc<TableSchema>, shape: &Arc<TableSchema>) -> Result<PartitionRoute> {
        let spec = self.partition_spec(t)?;
        let key = self.key_exprs(&spec, shape, 0)?;
        let own_constraint =
            self.partition_constraint(t, shape)?.map(|expr| BoundCheck { name: PARTITION_CHECK.to_owned(), expr });
        let mut partitions = Vec::new();
        let mut default = None;
        for p in &spec.partitions {
            let child = self.partition_named(&p.name)?;
            let target = if is_partitioned(&child) {
                RouteTarget::Node(Box::new(self.route_over(&child, shape)?))
            } else {
                let mut checks = self.own_checks(&child)?;
                let triggers = self.table_triggers(&child, super::plpgsql::Event::Insert, &[])?;
                // A BEFORE trigger may change the row: PostgreSQL then
                // checks the partition's constraint again (ExecInsert).
                if !triggers.before.is_empty()
                    && let Some(expr) = self.partition_constraint(&child, &child)?
                {
                    checks.push(BoundCheck { name: PARTITION_CHECK.to_owned(), expr });
                }
                let map: Vec<usize> = child
                    .columns
                    .iter()
                    .map(|c| shape.column_index(&c.name))
                    .collect::<Option<_>>()
                    .ok_or_else(|| SqlError::new("XX000", "a partition's column is not its parent's"))?;
                let reordered = map.len() != shape.columns.len() || map.iter().enumerate().any(|(i, &p)| i != p);
                RouteTarget::Leaf(child, checks, reordered.then_some(map), triggers)
            };
            match bound_pred(&key, &p.bound) {
                Some(cond) => partitions.push((Some(cond), target)),
                None => default = Some(target),
            }
        }
        partitions.extend(default.map(|d| (None, d)));
        let key = key.into_iter().zip(&spec.key).map(|(e, n)| (e, key_text(n, false))).collect();
        Ok(PartitionRoute { table: t.name.clone(), key, own_constraint, partitions })
    }

    /// Partitioned table `t`'s key and partitions; the statement depends on `t`.
    fn partition_spec(&mut self, t: &Arc<TableSchema>) -> Result<PartitionSpec> {
        let spec =
            PartitionSpec::decode(t).ok_or_else(|| SqlError::new("XX000", "a partitioned table without its key"))?;
        self.depend(t);
        Ok(spec)
    }

    /// A partition by name; the statement depends on it.
    fn partition_named(&mut self, name: &str) -> Result<Arc<TableSchema>> {
        let child = self
            .catalog
            .table_by_name(name)
            .cloned()
            .ok_or_else(|| SqlError::new("XX000", format!("partition \"{name}\" is gone")))?;
        self.depend(&child);
        Ok(child)
    }

    /// The `tableoid` of a row of partitioned table `t` (a partition of
    /// `root`, or `root` itself) read at `offset` of the joined row: the
    /// partition its key routes it to. Every stored row holds its
    /// partition's constraint, so the key names the partition.
    pub(super) fn routed_tableoid(
        &mut self,
        root: &Arc<TableSchema>,
        t: &Arc<TableSchema>,
        offset: usize,
    ) -> Result<Expr> {
        let spec = self.partition_spec(t)?;
        let key = self.key_exprs(&spec, root, offset)?;
        let mut whens = Vec::new();
        let mut otherwise = None;
        for p in &spec.partitions {
            let child = self.partition_named(&p.name)?;
            let oid = if is_partitioned(&child) {
                self.routed_tableoid(root, &child, offset)?
            } else {
                Expr::Const(Value::Int8(crate::catalog::table_oid(&child)))
            };
            match bound_pred(&key, &p.bound) {
                Some(cond) => whens.push((cond, oid)),
                None => otherwise = Some(Box::new(oid)),
            }
        }
        if whens.is_empty() {
            return Ok(otherwise.map_or(Expr::Const(Value::Null), |o| *o));
        }
        Ok(Expr::Case { operand: None, whens, otherwise })
    }

    /// The partitioned table `name` names, if it names one.
    pub(super) fn partitioned_named(&self, name: &ast::ObjectName) -> Result<Option<Arc<TableSchema>>> {
        Ok(match self.target(name)? {
            Some(crate::catalog::search_path::Target::Stored(k)) => {
                self.catalog.table_by_name(&k).filter(|t| is_partitioned(t)).cloned()
            }
            _ => None,
        })
    }

    /// A partitioned table in FROM: the UNION ALL of its partitions'
    /// rows, named after it; None while it has none (its own engine
    /// table, which holds no row, is read).
    pub(super) fn expand_partitioned(
        &mut self,
        t: &Arc<TableSchema>,
    ) -> Result<Option<(Arc<TableSchema>, VirtualSource)>> {
        self.depend(t);
        let parts = leaves(self.catalog, t);
        if parts.is_empty() {
            return Ok(None);
        }
        for p in &parts {
            self.depend(p);
        }
        let names: Vec<String> = t.visible_columns().iter().map(|c| crate::catalog::quote_ident(&c.name)).collect();
        let text = parts
            .iter()
            .map(|p| format!("SELECT {} FROM {}", names.join(", "), object_name(&p.name)))
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        let q = match crate::parse::parse_sql(&text) {
            Ok(mut stmts) if stmts.len() == 1 => match stmts.pop() {
                Some(ast::Statement::Query(q)) => q,
                _ => return Err(SqlError::new("XX000", "the partitions' query is not a query")),
            },
            _ => return Err(SqlError::new("54001", "stack depth limit exceeded")),
        };
        let ctes = std::mem::take(&mut self.ctes);
        let correlated = self.correlated;
        let plan = self.as_view_owner(t, |b| b.query(&q, None));
        self.ctes = ctes;
        self.correlated = correlated;
        let plan = plan?;
        let cols = t.visible_columns().iter().map(|c| (c.name.clone(), c.ty)).collect();
        let tree = SetTree::Select(Box::new(plan));
        let mut schema = TableSchema::clone(&super::detached(&t.name, cols));
        schema.annotation = Some(format!("{PARTITIONED_READ}{}", t.name));
        Ok(Some((Arc::new(schema), VirtualSource::Query(tree))))
    }

    /// UPDATE or DELETE whose target `twj` is a partitioned table: the
    /// statement `with_target` makes for each partition, bound in turn
    /// (the partitioned table's own when it has none). None for another target.
    pub(super) fn partition_fanout(
        &mut self,
        twj: &ast::TableWithJoins,
        text: &str,
        bind: impl Fn(&mut Self, ast::TableFactor) -> Result<Plan>,
    ) -> Result<Option<Plan>> {
        if self.partition_fanout {
            return Ok(None);
        }
        let ast::TableFactor::Table { name, alias, .. } = &twj.relation else { return Ok(None) };
        let Some(t) = self.partitioned_named(name)? else { return Ok(None) };
        // One snapshot for the whole statement is what PostgreSQL reads;
        // partition by partition, a subquery would see the earlier ones' writes.
        if text.to_uppercase().contains("SELECT") {
            return Err(SqlError::unsupported(
                "UPDATE or DELETE of a partitioned table with a subquery, FROM or USING",
            ));
        }
        self.depend(&t);
        let mut parts = leaves(self.catalog, &t);
        // Each partition's RETURNING lists its own columns in its own order.
        let names = |x: &TableSchema| x.visible_columns().iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        if text.to_uppercase().contains("RETURNING") && parts.iter().any(|p| names(p) != names(&t)) {
            return Err(SqlError::unsupported(
                "RETURNING from UPDATE or DELETE of a partitioned table with a partition whose columns are in another order",
            ));
        }
        if parts.is_empty() {
            parts.push(Arc::clone(&t));
        }
        let alias = alias.clone().unwrap_or_else(|| ast::TableAlias {
            explicit: true,
            name: ast::Ident::with_quote('"', crate::names::short(&t.name)),
            columns: Vec::new(),
            at: None,
        });
        self.partition_fanout = true;
        let perms_before = self.perms.len();
        let mut plans = Vec::new();
        let mut r = Ok(());
        for p in &parts {
            self.depend(p);
            let mut relation = twj.relation.clone();
            if let ast::TableFactor::Table { name, alias: a, .. } = &mut relation {
                *name = object_name(&p.name);
                *a = Some(alias.clone());
            }
            match bind(self, relation) {
                Ok(plan) => plans.push(plan),
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        self.partition_fanout = false;
        r?;
        // PostgreSQL fires the AFTER row triggers once every partition is
        // written; partition by partition would fire some before others' rows.
        let after = |p: &Plan| match p {
            Plan::Update(u) => !u.triggers.after.is_empty(),
            Plan::Delete(d) => !d.triggers.after.is_empty(),
            _ => false,
        };
        if plans.len() > 1 && plans.iter().any(after) {
            return Err(SqlError::unsupported(
                "UPDATE or DELETE of a partitioned table with a partition that has AFTER row triggers",
            ));
        }
        // Privileges are the partitioned table's (PostgreSQL checks no partition's).
        let mut kept: Vec<super::Perm> = Vec::new();
        for mut p in self.perms.split_off(perms_before) {
            if parts.iter().any(|t| t.name == p.relation) {
                p.relation = t.name.clone();
            }
            match kept.iter_mut().find(|k| {
                k.relation == p.relation && k.kind == p.kind && k.owner == p.owner && k.via_view == p.via_view
            }) {
                Some(k) => k.needed = k.needed.union(p.needed),
                None => kept.push(p),
            }
        }
        self.perms.extend(kept);
        Ok(Some(Plan::Partitioned(plans)))
    }
}

/// 0A000 when a default partition's rows, which a new bound's guard reads
/// over the partitioned table's row, have their columns in another order.
fn refuse_reordered(parent: &TableSchema, guard: &[Arc<TableSchema>]) -> Result<()> {
    let names = |t: &TableSchema| t.columns.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    if guard.iter().any(|g| names(g) != names(parent)) {
        return Err(SqlError::unsupported(
            "a new partition of a table whose default partition has its columns in another order",
        ));
    }
    Ok(())
}

/// 0A000 for a statement that would change a partitioned table or a
/// partition's definition in ways pgtier does not carry to the others.
pub(super) fn refuse_partitioned(catalog: &pgtier_engine::Catalog, t: &TableSchema, what: &str) -> Result<()> {
    if is_partitioned(t) {
        return Err(SqlError::unsupported(format!("{what} of a partitioned table")));
    }
    if parent_of(catalog, &t.name).is_some() {
        return Err(SqlError::unsupported(format!("{what} of a partition")));
    }
    Ok(())
}
