//! CREATE / DROP / TRUNCATE.

use std::sync::Arc;

use pgtier_engine::{EngineError, IndexDef, SequenceOptions, TableDef, TableSchema, Value};

use super::Exec;
use crate::catalog::partitions::{self, Partition, PartitionSpec};
use crate::error::{Result, SqlError, SqlNotice};
use crate::expr::{Env, Expr};
use crate::plan::{ColumnSequence, SelectPlan};

impl Exec<'_> {
    pub fn create_table(&mut self, def: &TableDef, if_not_exists: bool) -> Result<()> {
        self.ensure_temp_schema(&def.name)?;
        if if_not_exists && self.txn.catalog().table_by_name(&def.name).is_some() {
            self.notices.push(SqlNotice {
                sqlstate: "42P07",
                message: format!("relation \"{}\" already exists, skipping", crate::names::short(&def.name)),
            });
            return Ok(());
        }
        self.txn.create_table(def)?;
        self.record_owner(&def.name)
    }

    /// CREATE TABLE AS: the query runs first (it cannot read the table it
    /// fills), then the table is made and its rows inserted; all in the
    /// statement's transaction, so a failure leaves neither. Returns the
    /// rows inserted.
    pub fn create_table_as(
        &mut self,
        def: &TableDef,
        query: &SelectPlan,
        if_not_exists: bool,
        params: &[Value],
    ) -> Result<u64> {
        if if_not_exists && self.txn.catalog().table_by_name(&def.name).is_some() {
            self.notices.push(SqlNotice {
                sqlstate: "42P07",
                message: format!("relation \"{}\" already exists, skipping", crate::names::short(&def.name)),
            });
            return Ok(0);
        }
        let rows = self.select_rows(query, params, &[])?;
        self.create_table(def, false)?;
        let table = Arc::clone(
            self.txn
                .catalog()
                .table_by_name(&def.name)
                .ok_or_else(|| SqlError::new("XX000", "the table just created is missing"))?,
        );
        let blank = table.default_row();
        let mut count = 0;
        for r in rows {
            let mut full = blank.clone();
            for (k, v) in r.into_iter().take(query.visible).enumerate() {
                full[k] = v;
            }
            self.txn.insert(table.id, &full)?;
            count += 1;
        }
        Ok(count)
    }

    /// CREATE TABLE whose serial or identity columns need their sequences
    /// made first (in the same transaction).
    pub fn create_table_with_sequences(
        &mut self,
        def: &TableDef,
        sequences: &[ColumnSequence],
        indexes: &[IndexDef],
        if_not_exists: bool,
    ) -> Result<()> {
        self.ensure_temp_schema(&def.name)?;
        if if_not_exists && self.txn.catalog().table_by_name(&def.name).is_some() {
            return self.create_table(def, if_not_exists);
        }
        // A name already taken is the engine's 42P07.
        for s in sequences {
            self.txn.create_sequence(&s.name, s.options.clone())?;
            self.record_owner(&s.name)?;
        }
        self.create_table(def, if_not_exists)?;
        for index in indexes {
            self.create_index(index, false)?;
        }
        Ok(())
    }

    /// Adds `partition` (just created) to partitioned table `parent`'s
    /// list, under the DDL lock its creation took (so the overlap check
    /// sees every committed partition). When the parent has a default
    /// partition, none of its rows may fall in the new bound.
    pub fn add_partition(
        &mut self,
        parent: &str,
        partition: &Partition,
        guard: &[Arc<TableSchema>],
        guard_bound: Option<&Expr>,
        default_name: &str,
    ) -> Result<()> {
        let p = self.txn.catalog().table_by_name(parent).cloned().ok_or_else(|| {
            SqlError::new("42P01", format!("relation \"{}\" does not exist", crate::names::short(parent)))
        })?;
        let mut spec = PartitionSpec::decode(&p)
            .ok_or_else(|| SqlError::new("42809", format!("\"{}\" is not partitioned", crate::names::short(parent))))?;
        spec.check_new(&partition.name, &partition.bound)?;
        spec.partitions.push(partition.clone());
        self.txn.set_annotation(p.id, Some(spec.encode()))?;
        let Some(bound) = guard_bound else { return Ok(()) };
        let env = Env { params: &[], now_micros: self.now_micros, outer: &[] };
        for t in guard {
            for row in &self.table_rows(t)? {
                if bound.eval_bool(&env, self, row)? == Some(true) {
                    return Err(SqlError::new(
                        "23514",
                        format!(
                            "updated partition constraint for default partition \"{}\" would be violated by some row",
                            crate::names::short(default_name)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every row of `table` this transaction sees, as owned values (a
    /// DDL statement checking or rewriting them while it evaluates
    /// expressions that may read the transaction again).
    pub(super) fn table_rows(&mut self, table: &TableSchema) -> Result<Vec<Vec<Value>>> {
        let width = table.columns.len();
        let mut rows: Vec<Vec<Value>> = Vec::new();
        self.txn.scan_table(table.id, |r| {
            rows.push((0..width).map(|c| r.get(c).to_owned_value()).collect());
            Ok(true)
        })?;
        Ok(rows)
    }

    /// ATTACH PARTITION: the table's rows must hold its partition
    /// constraint `check` (PostgreSQL scans them too).
    pub fn attach_partition(&mut self, table: &Arc<TableSchema>, check: &Expr) -> Result<()> {
        self.txn.lock_table_exclusive(table.id)?;
        let rows = self.table_rows(table)?;
        let env = Env { params: &[], now_micros: self.now_micros, outer: &[] };
        for row in &rows {
            if check.eval_bool(&env, self, row)? != Some(true) {
                return Err(SqlError::new(
                    "23514",
                    format!(
                        "partition constraint of relation \"{}\" is violated by some row",
                        crate::names::short(&table.name)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// DETACH PARTITION: the partition leaves `parent`'s list and is an
    /// ordinary table from then on.
    pub fn detach_partition(&mut self, parent: &str, name: &str) -> Result<()> {
        let p = self.txn.catalog().table_by_name(parent).cloned();
        let Some((p, mut spec)) = p.and_then(|p| PartitionSpec::decode(&p).map(|s| (p, s))) else {
            return Err(SqlError::new(
                "42809",
                format!("table \"{}\" is not partitioned", crate::names::short(parent)),
            ));
        };
        spec.partitions.retain(|x| x.name != name);
        self.txn.set_annotation(p.id, Some(spec.encode()))?;
        Ok(())
    }

    pub fn create_sequence(&mut self, name: &str, options: &SequenceOptions, if_not_exists: bool) -> Result<()> {
        self.ensure_temp_schema(name)?;
        let cat = self.txn.catalog();
        if cat.table_by_name(name).is_some() || cat.index_by_name(name).is_some() {
            if if_not_exists {
                self.notices.push(SqlNotice {
                    sqlstate: "42P07",
                    message: format!("relation \"{}\" already exists, skipping", crate::names::short(name)),
                });
                return Ok(());
            }
            return Err(SqlError::new("42P07", format!("relation \"{}\" already exists", crate::names::short(name))));
        }
        self.txn.create_sequence(name, options.clone())?;
        self.record_owner(name)
    }

    pub fn create_index(&mut self, def: &IndexDef, if_not_exists: bool) -> Result<()> {
        if if_not_exists && self.txn.catalog().index_by_name(&def.name).is_some() {
            self.notices.push(SqlNotice {
                sqlstate: "42P07",
                message: format!("relation \"{}\" already exists, skipping", crate::names::short(&def.name)),
            });
            return Ok(());
        }
        self.txn.create_index(def)?;
        Ok(())
    }

    /// TRUNCATE: deletes every row this statement sees, table by table in
    /// the planned order; RESTART IDENTITY sets each owned sequence back to
    /// its start.
    pub fn truncate(&mut self, tables: &[Arc<TableSchema>], restart_identity: bool) -> Result<()> {
        let mut keys: Vec<Value> = Vec::new();
        for t in tables {
            keys.clear();
            let pk = &t.primary_key;
            self.txn.scan_table(t.id, |r| {
                keys.extend(pk.iter().map(|&k| r.get(k).to_owned_value()));
                Ok(true)
            })?;
            for key in keys.chunks(pk.len().max(1)) {
                self.txn.delete(t.id, key)?;
            }
            if restart_identity {
                for (seq, _) in t.columns.iter().filter_map(|c| c.sequence).filter(|(_, how)| how.owns()) {
                    let start = self.txn.catalog().table(seq).and_then(|s| s.sequence.as_ref()).map(|o| o.start);
                    if let Some(start) = start {
                        self.txn.setval(seq, start, false)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// DROP TABLE, or DROP SEQUENCE when `sequences`: each name must be of
    /// that kind (PostgreSQL's 42809 and its hint otherwise).
    pub fn drop_tables(&mut self, names: &[String], if_exists: bool, sequences: bool, cascade: bool) -> Result<()> {
        let (kind, other, other_kind) =
            if sequences { ("sequence", "table", "TABLE") } else { ("table", "sequence", "SEQUENCE") };
        let mut pending: Vec<String> = Vec::new();
        for n in names {
            if let Some(t) = self.txn.catalog().table_by_name(n) {
                if crate::catalog::is_view(t) {
                    return Err(SqlError::new("42809", format!("\"{n}\" is not a {kind}"))
                        .with_hint("Use DROP VIEW to remove a view."));
                }
                if t.sequence.is_some() != sequences {
                    return Err(SqlError::new("42809", format!("\"{n}\" is not a {kind}"))
                        .with_hint(format!("Use DROP {other_kind} to remove a {other}.")));
                }
                pending.push(n.clone());
            } else if if_exists {
                self.notices
                    .push(SqlNotice { sqlstate: "00000", message: format!("{kind} \"{n}\" does not exist, skipping") });
            } else {
                return Err(SqlError::new("42P01", format!("{kind} \"{n}\" does not exist")));
            }
        }
        // A partitioned table's partitions go with it.
        let mut k = 0;
        while let Some(n) = pending.get(k) {
            if let Some(spec) = self.txn.catalog().table_by_name(n).and_then(|t| PartitionSpec::decode(t)) {
                for p in spec.partitions {
                    if !pending.contains(&p.name) {
                        pending.push(p.name);
                    }
                }
            }
            k += 1;
        }
        for v in self.views_to_drop(&pending, kind, cascade)? {
            self.txn.drop_table(&v)?;
            self.drop_rules_of(&v)?;
        }
        // Children first, so a statement dropping a parent with its children works.
        while !pending.is_empty() {
            let cat = self.txn.catalog();
            let pick = pending.iter().position(|n| {
                let Some(t) = cat.table_by_name(n) else { return true };
                !cat.referencing(t.id).iter().any(|fk| {
                    fk.child != t.id && pending.iter().any(|p| cat.table_by_name(p).is_some_and(|pt| pt.id == fk.child))
                })
            });
            let name = pending.remove(pick.unwrap_or(0));
            self.txn.drop_table(&name).map_err(drop_error)?;
            // Its triggers go with it (as PostgreSQL's dependency).
            for t in crate::catalog::triggers::triggers_of(self.txn.catalog(), &name) {
                self.txn.drop_table(&t.schema.name)?;
            }
            self.drop_rules_of(&name)?;
            // So does its analytics flag (the copy ends with the table's id).
            if let Some(flag) = crate::catalog::analytics::flag_of(self.txn.catalog(), &name).map(|f| f.name.clone()) {
                self.txn.drop_table(&flag)?;
            }
            // A partition dropped alone leaves its partitioned table's list.
            if let Some((parent, mut spec, k)) = partitions::parent_of(self.txn.catalog(), &name) {
                spec.partitions.remove(k);
                self.txn.set_annotation(parent.id, Some(spec.encode()))?;
            }
        }
        self.prune_acls()
    }

    pub fn drop_indexes(&mut self, names: &[String], if_exists: bool) -> Result<()> {
        for n in names {
            if let Some(t) = self.txn.catalog().table_by_name(n) {
                let kind = if crate::catalog::is_view(t) {
                    "VIEW"
                } else if t.sequence.is_some() {
                    "SEQUENCE"
                } else {
                    "TABLE"
                };
                return Err(SqlError::new("42809", format!("\"{n}\" is not an index"))
                    .with_hint(format!("Use DROP {kind} to remove a {}.", kind.to_lowercase())));
            }
            if self.txn.catalog().index_by_name(n).is_none() {
                if if_exists {
                    self.notices.push(SqlNotice {
                        sqlstate: "00000",
                        message: format!("index \"{n}\" does not exist, skipping"),
                    });
                    continue;
                }
                return Err(SqlError::new("42704", format!("index \"{n}\" does not exist")));
            }
            self.txn.drop_index(n)?;
        }
        Ok(())
    }
}

fn drop_error(e: EngineError) -> SqlError {
    SqlError::from(e)
}
