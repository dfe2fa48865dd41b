//! Catalog: table, index and foreign-key definitions. A [`Catalog`] is an
//! immutable snapshot; DDL builds a modified copy that its transaction sees
//! privately and that replaces the shared one at commit (copy-on-write).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::codec::{Reader, Writer};
use crate::error::{EngineError, Result};
use crate::row::RowLayout;
use crate::types::{DataType, Value, coerce};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ForeignKeyId(pub u32);

/// Most columns a table may have (PostgreSQL: 1600).
pub const COLUMNS_MAX: usize = 1600;
/// Most columns in one key (PostgreSQL: 32).
pub const KEY_COLUMNS_MAX: usize = 32;

/// A column as DDL declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
    /// Constant default; `None` means NULL.
    pub default: Option<Value>,
    /// The default draws from this sequence (by name; it may be created
    /// earlier in the same transaction) instead of `default`.
    pub sequence: Option<(String, SequenceDefault)>,
    /// A default the SQL layer evaluates for each row (`now()`), kept as
    /// PostgreSQL prints it; the engine only stores it.
    pub default_sql: Option<String>,
}

impl ColumnDef {
    pub fn new(name: impl Into<String>, ty: DataType) -> ColumnDef {
        ColumnDef { name: name.into(), ty, nullable: true, default: None, sequence: None, default_sql: None }
    }
    pub fn not_null(mut self) -> ColumnDef {
        self.nullable = false;
        self
    }
    pub fn default_value(mut self, value: Value) -> ColumnDef {
        self.default = Some(value);
        self
    }
}

/// A foreign key as DDL declares it: child columns reference the parent's
/// primary key (empty `parent_columns`) or a unique index's columns.
/// Actions are RESTRICT / NO ACTION only.
#[derive(Clone, Debug, PartialEq)]
pub struct ForeignKeyDef {
    pub name: Option<String>,
    pub columns: Vec<String>,
    pub parent_table: String,
    pub parent_columns: Vec<String>,
    pub on_delete: FkAction,
    pub timing: FkTiming,
}

/// When a foreign key's NO ACTION checks run (PostgreSQL's DEFERRABLE /
/// INITIALLY DEFERRED, and `SET CONSTRAINTS` within a transaction). A
/// deferred check that fails at once is queued and run again at commit
/// (or at `SET CONSTRAINTS ... IMMEDIATE`), where it fails the commit with
/// 23503 if the row is still orphaned (transaction/deferred.rs). Actions
/// (CASCADE, SET NULL) are never deferred, as in PostgreSQL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FkTiming {
    /// NOT DEFERRABLE: checked as each row is written.
    #[default]
    Immediate,
    /// DEFERRABLE INITIALLY IMMEDIATE: checked at once unless a
    /// transaction defers it.
    DeferrableImmediate,
    /// DEFERRABLE INITIALLY DEFERRED: checked at commit unless a
    /// transaction sets it IMMEDIATE.
    DeferrableDeferred,
}

impl FkTiming {
    pub fn deferrable(self) -> bool {
        self != FkTiming::Immediate
    }

    pub fn initially_deferred(self) -> bool {
        self == FkTiming::DeferrableDeferred
    }

    fn tag(self) -> u8 {
        match self {
            FkTiming::Immediate => 0,
            FkTiming::DeferrableImmediate => 1,
            FkTiming::DeferrableDeferred => 2,
        }
    }
}

/// What deleting a referenced row does to the rows that reference it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FkAction {
    /// Refused while referencing rows exist (NO ACTION and RESTRICT: the
    /// engine checks at once, so the two behave alike).
    #[default]
    NoAction,
    /// The referencing rows are deleted too (and their own references
    /// followed).
    Cascade,
    /// The referencing columns are set to NULL.
    SetNull,
}

impl FkAction {
    fn tag(self) -> u8 {
        match self {
            FkAction::NoAction => 0,
            FkAction::Cascade => 1,
            FkAction::SetNull => 2,
        }
    }
}

/// `CREATE TABLE`. Rows are stored, locked and logged by primary key; a
/// table declared without one gets the hidden row id [`ROWID_COLUMN`].
#[derive(Clone, Debug, PartialEq)]
pub struct TableDef {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    pub primary_key: Vec<String>,
    /// Also keep the primary key in an ordered index (range and prefix scans
    /// on the key, e.g. all rows of one `s_id` in a composite key). Default true.
    pub primary_key_ordered: bool,
    /// UNIQUE constraints: (optional name, columns). Each becomes a unique index.
    pub unique: Vec<(Option<String>, Vec<String>)>,
    pub foreign_keys: Vec<ForeignKeyDef>,
    /// Set for a sequence's relation (see [`SEQUENCE_COLUMNS`]).
    pub sequence: Option<SequenceOptions>,
    pub checks: Vec<CheckDef>,
    /// Opaque text kept with the definition (logged, checkpointed,
    /// recovered) and returned in [`TableSchema::annotation`]; the cache
    /// stores its group definitions here. Changed later with
    /// [`crate::Transaction::set_annotation`].
    pub annotation: Option<String>,
}

/// A CHECK constraint: SQL text the SQL layer binds and enforces on every
/// row it writes. The engine only keeps it (its typed API does not check).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckDef {
    pub name: String,
    pub sql: String,
}

impl TableDef {
    pub fn new(name: impl Into<String>, columns: Vec<ColumnDef>, primary_key: &[&str]) -> TableDef {
        TableDef {
            name: name.into(),
            columns,
            primary_key: primary_key.iter().map(|s| (*s).to_owned()).collect(),
            primary_key_ordered: true,
            unique: Vec::new(),
            foreign_keys: Vec::new(),
            sequence: None,
            checks: Vec::new(),
            annotation: None,
        }
    }
}

/// ALTER TABLE: a table's whole new definition. The table is rewritten
/// under a new [`TableId`] (a row image's shape never changes for an id,
/// so the WAL, checkpoints and the commit stream decode old and new rows
/// alike); foreign keys of other tables that reference it follow it.
#[derive(Clone, Debug, PartialEq)]
pub struct AlterTableDef {
    /// The new definition (its name differs from the old one after RENAME TO).
    pub def: TableDef,
    /// Secondary indexes to keep or add (their `table` is ignored): indexes
    /// the definition implies (primary key, UNIQUE, a foreign key's
    /// `<fk>_idx`) are made from `def` and must not be listed.
    pub indexes: Vec<IndexDef>,
    /// For each column of `def`, the old column (position among the old
    /// table's columns) it continues, None for a new one: how other
    /// tables' foreign keys find the columns they reference.
    pub sources: Vec<Option<usize>>,
    /// The primary key index's name when not `<table>_pkey` (PostgreSQL
    /// keeps it across RENAME TO; ADD CONSTRAINT name PRIMARY KEY sets it).
    pub primary_key_name: Option<String>,
    /// The new table's [`TableSchema::dropped_attnums`].
    pub dropped_attnums: Vec<u16>,
}

/// `CREATE [UNIQUE] INDEX name ON table (columns) [INCLUDE (include)]
/// [WHERE predicate]`. Indexes are ordered.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexDef {
    pub name: String,
    pub table: String,
    pub columns: Vec<String>,
    pub unique: bool,
    /// INCLUDE columns: carried by the index in PostgreSQL, never part of
    /// its key (nor of its uniqueness).
    pub include: Vec<String>,
    pub options: IndexOptions,
}

/// What CREATE INDEX declares that changes neither what the engine's index
/// holds nor how it is searched, kept for the catalogs (pg_index,
/// pg_get_indexdef) and for ALTER TABLE to carry over. The SQL layer only
/// accepts declarations for which that holds: a descending or NULLS FIRST
/// key is the same btree read the other way; the pattern operator classes
/// order as the default ones do in the C collation; a partial index holds
/// every row (a superset that every search rechecks) and is never unique.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexOptions {
    /// One per key column, or empty when every key is declared plainly.
    pub keys: Vec<IndexKeyOptions>,
    /// The WHERE of a partial index as the SQL layer keeps it.
    pub predicate: Option<String>,
}

/// One key column's declaration (PostgreSQL's pg_index.indoption bits and
/// indclass).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexKeyOptions {
    pub descending: bool,
    pub nulls_first: bool,
    /// A non-default operator class by name.
    pub opclass: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub ty: DataType,
    pub nullable: bool,
    pub default: Option<Value>,
    /// The default is the next value of this sequence (`default` is None).
    pub sequence: Option<(TableId, SequenceDefault)>,
    /// See [`ColumnDef::default_sql`].
    pub default_sql: Option<String>,
}

/// How a column's default draws from a sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceDefault {
    /// `serial`: the table owns the sequence (dropped with it).
    Serial,
    /// `DEFAULT nextval('s')`: the sequence stays when the table goes, but
    /// cannot be dropped while the column uses it.
    Nextval,
    /// `GENERATED ALWAYS AS IDENTITY` (owned; explicit values refused).
    IdentityAlways,
    /// `GENERATED BY DEFAULT AS IDENTITY` (owned).
    IdentityByDefault,
}

impl SequenceDefault {
    /// The sequence belongs to the column: dropped with its table.
    pub fn owns(self) -> bool {
        self != SequenceDefault::Nextval
    }

    fn tag(self) -> u8 {
        match self {
            SequenceDefault::Serial => 1,
            SequenceDefault::Nextval => 2,
            SequenceDefault::IdentityAlways => 3,
            SequenceDefault::IdentityByDefault => 4,
        }
    }

    fn from_tag(tag: u8) -> Option<SequenceDefault> {
        Some(match tag {
            1 => SequenceDefault::Serial,
            2 => SequenceDefault::Nextval,
            3 => SequenceDefault::IdentityAlways,
            4 => SequenceDefault::IdentityByDefault,
            _ => return None,
        })
    }
}

/// A sequence's relation holds one row of these columns (PostgreSQL's
/// `SELECT * FROM seq`), plus the hidden row id.
pub const SEQUENCE_COLUMNS: [&str; 3] = ["last_value", "log_cnt", "is_called"];

/// CREATE SEQUENCE's options, resolved. Immutable (no ALTER SEQUENCE).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequenceOptions {
    /// smallint, integer or bigint: bounds the default MINVALUE/MAXVALUE.
    pub data_type: DataType,
    pub start: i64,
    pub increment: i64,
    pub min: i64,
    pub max: i64,
    pub cycle: bool,
}

impl SequenceOptions {
    /// PostgreSQL's defaults and checks (DefineSequence/init_params): an
    /// ascending sequence runs from 1 to the type's maximum, a descending
    /// one from -1 down to its minimum; START defaults to the end it
    /// starts from.
    pub fn new(
        data_type: DataType,
        increment: i64,
        min: Option<i64>,
        max: Option<i64>,
        start: Option<i64>,
        cycle: bool,
    ) -> Result<SequenceOptions> {
        let invalid = |m: String| EngineError::definition("22023", m);
        let (type_min, type_max) = match data_type {
            DataType::Int2 => (i64::from(i16::MIN), i64::from(i16::MAX)),
            DataType::Int4 => (i64::from(i32::MIN), i64::from(i32::MAX)),
            DataType::Int8 => (i64::MIN, i64::MAX),
            _ => return Err(invalid("sequence type must be smallint, integer, or bigint".to_owned())),
        };
        if increment == 0 {
            return Err(invalid("INCREMENT must not be zero".to_owned()));
        }
        let name = data_type.pg_name();
        let max = max.unwrap_or(if increment > 0 { type_max } else { -1 });
        if !(type_min..=type_max).contains(&max) {
            return Err(invalid(format!("MAXVALUE ({max}) is out of range for sequence data type {name}")));
        }
        let min = min.unwrap_or(if increment > 0 { 1 } else { type_min });
        if !(type_min..=type_max).contains(&min) {
            return Err(invalid(format!("MINVALUE ({min}) is out of range for sequence data type {name}")));
        }
        if min >= max {
            return Err(invalid(format!("MINVALUE ({min}) must be less than MAXVALUE ({max})")));
        }
        let start = start.unwrap_or(if increment > 0 { min } else { max });
        if start < min {
            return Err(invalid(format!("START value ({start}) cannot be less than MINVALUE ({min})")));
        }
        if start > max {
            return Err(invalid(format!("START value ({start}) cannot be greater than MAXVALUE ({max})")));
        }
        Ok(SequenceOptions { data_type, start, increment, min, max, cycle })
    }
}

/// The hidden row id the engine adds, as the last column and the primary
/// key, to a table declared without a primary key (rows are stored and
/// logged by key). PostgreSQL reserves `ctid` as a system column name, so no
/// user column can collide with it. Values come from a per-table counter
/// (`TableStore::allocate_rowid`); they are never reused within a run and
/// after recovery continue past the largest stored one.
pub const ROWID_COLUMN: &str = "ctid";

/// PostgreSQL's system column names: a user column may not take them.
const SYSTEM_COLUMNS: [&str; 6] = ["ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"];

impl Column {
    /// The engine's hidden row id: not in `SELECT *`, not an INSERT target.
    pub fn is_hidden(&self) -> bool {
        self.name == ROWID_COLUMN
    }
}

/// A resolved table. Its row shape is immutable for the table's lifetime
/// (ALTER TABLE makes a new table id), so a row image plus its table id
/// always decodes the same way; only the annotation can change (a new
/// `TableSchema` value).
#[derive(Clone, Debug)]
pub struct TableSchema {
    pub id: TableId,
    pub name: String,
    pub columns: Vec<Column>,
    /// Column positions of the primary key, in key order.
    pub primary_key: Vec<usize>,
    /// The index that stands for the primary key (`<table>_pkey`).
    pub primary_index: IndexId,
    /// Set when this relation is a sequence (one row: [`SEQUENCE_COLUMNS`]).
    pub sequence: Option<SequenceOptions>,
    /// CHECK constraints, by name.
    pub checks: Vec<CheckDef>,
    /// See [`TableDef::annotation`].
    pub annotation: Option<String>,
    /// Attribute numbers (1-based) of columns ALTER TABLE dropped, sorted:
    /// PostgreSQL never reuses them, and clients see the gaps
    /// (`information_schema.columns.ordinal_position`, `pg_attribute`).
    pub dropped_attnums: Vec<u16>,
    pub(crate) layout: RowLayout,
}

impl TableSchema {
    /// PostgreSQL's attribute number of column `column`: its position
    /// counted past the attribute numbers of dropped columns.
    pub fn attnum(&self, column: usize) -> i16 {
        let mut n = column + 1;
        for &d in &self.dropped_attnums {
            if usize::from(d) <= n {
                n += 1;
            }
        }
        i16::try_from(n).unwrap_or(i16::MAX)
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Declared without a primary key: the last column is the hidden row id.
    pub fn has_rowid(&self) -> bool {
        self.columns.last().is_some_and(Column::is_hidden)
    }

    /// The columns users declared (`SELECT *`, INSERT without a column
    /// list, COPY, the catalog views): all but a hidden row id.
    pub fn visible_columns(&self) -> &[Column] {
        if self.has_rowid() { &self.columns[..self.columns.len() - 1] } else { &self.columns }
    }

    /// One value per column: each column's DEFAULT, or NULL. INSERT with a
    /// column list starts from this row.
    pub fn default_row(&self) -> Vec<Value> {
        self.columns.iter().map(|c| c.default.clone().unwrap_or(Value::Null)).collect()
    }

    pub(crate) fn layout(&self) -> &RowLayout {
        &self.layout
    }

    /// The shape of rows that are not stored in the engine (the SQL layer's
    /// system catalogs, subqueries in FROM, set operations, table
    /// functions): no primary key, and an id no stored table can have, so
    /// it never resolves in a catalog.
    pub fn detached(name: impl Into<String>, columns: Vec<Column>) -> TableSchema {
        let layout = RowLayout::new(&columns.iter().map(|c| c.ty).collect::<Vec<_>>());
        TableSchema {
            id: TableId(u32::MAX),
            name: name.into(),
            columns,
            primary_key: Vec::new(),
            primary_index: IndexId(u32::MAX),
            sequence: None,
            checks: Vec::new(),
            annotation: None,
            dropped_attnums: Vec::new(),
            layout,
        }
    }
}

/// A resolved index. The primary key is an index too (`primary`): stored as
/// the table's hash index, plus an ordered copy when `ordered`.
#[derive(Debug, PartialEq, Eq)]
pub struct IndexSchema {
    pub id: IndexId,
    pub name: String,
    pub table: TableId,
    pub columns: Vec<usize>,
    pub unique: bool,
    pub primary: bool,
    /// Supports range/prefix scans. Always true for secondary indexes.
    pub ordered: bool,
    /// See [`IndexDef::include`].
    pub include: Vec<usize>,
    pub options: IndexOptions,
}

#[derive(Debug, PartialEq, Eq)]
pub struct ForeignKey {
    pub id: ForeignKeyId,
    pub name: String,
    pub child: TableId,
    pub child_columns: Vec<usize>,
    pub parent: TableId,
    pub parent_columns: Vec<usize>,
    /// Unique index on the parent columns (primary or UNIQUE).
    pub parent_index: IndexId,
    /// Ordered index on the child whose leading columns are `child_columns`,
    /// used to find referencing rows when a parent row is deleted. Created
    /// automatically (`<fk name>_idx`) when no existing index qualifies.
    pub child_index: IndexId,
    pub on_delete: FkAction,
    pub timing: FkTiming,
}

/// An immutable catalog snapshot.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    tables: BTreeMap<TableId, Arc<TableSchema>>,
    table_names: HashMap<String, TableId>,
    indexes: BTreeMap<IndexId, Arc<IndexSchema>>,
    index_names: HashMap<String, IndexId>,
    foreign_keys: BTreeMap<ForeignKeyId, Arc<ForeignKey>>,
    /// Every table that ever existed, so old WAL records (commit stream)
    /// still decode after a DROP.
    history: BTreeMap<TableId, Arc<TableSchema>>,
    next_table_id: u32,
    next_index_id: u32,
    next_fk_id: u32,
    /// Changes whenever a table or index is added or removed, or a table's
    /// annotation is replaced (a value no other catalog of this process
    /// has had): a plan that resolved names against this catalog knows
    /// whether they may resolve otherwise now, and a session whose role
    /// needed no privilege check knows the roles (an annotation) are the
    /// same.
    names_stamp: u64,
}

/// The source of [`Catalog::names_stamp`] values, unique in the process,
/// so catalogs of different transactions never share one by accident.
static NAMES_STAMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Catalog {
    /// Equal for two catalogs only when one is the other's unchanged copy
    /// as far as table and index names and table annotations go (see the
    /// field).
    pub fn names_stamp(&self) -> u64 {
        self.names_stamp
    }

    fn names_changed(&mut self) {
        self.names_stamp = NAMES_STAMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    }

    pub fn table(&self, id: TableId) -> Option<&Arc<TableSchema>> {
        self.tables.get(&id)
    }
    pub fn table_by_name(&self, name: &str) -> Option<&Arc<TableSchema>> {
        self.table_names.get(name).and_then(|id| self.tables.get(id))
    }
    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableSchema>> {
        self.tables.values()
    }
    pub fn index(&self, id: IndexId) -> Option<&Arc<IndexSchema>> {
        self.indexes.get(&id)
    }
    pub fn index_by_name(&self, name: &str) -> Option<&Arc<IndexSchema>> {
        self.index_names.get(name).and_then(|id| self.indexes.get(id))
    }
    /// Indexes of a table, primary first.
    pub fn indexes_of(&self, table: TableId) -> Vec<Arc<IndexSchema>> {
        let mut out: Vec<Arc<IndexSchema>> = self.indexes.values().filter(|i| i.table == table).cloned().collect();
        out.sort_by_key(|i| (!i.primary, i.id));
        out
    }
    pub fn foreign_key(&self, id: ForeignKeyId) -> Option<&Arc<ForeignKey>> {
        self.foreign_keys.get(&id)
    }
    /// Foreign keys declared on `table` (it is the child).
    pub fn foreign_keys_of(&self, table: TableId) -> Vec<Arc<ForeignKey>> {
        self.foreign_keys.values().filter(|f| f.child == table).cloned().collect()
    }
    /// Foreign keys that reference `table` (it is the parent).
    pub fn referencing(&self, table: TableId) -> Vec<Arc<ForeignKey>> {
        self.foreign_keys.values().filter(|f| f.parent == table).cloned().collect()
    }
    /// Schema of a table that may since have been dropped.
    pub fn table_ever(&self, id: TableId) -> Option<&Arc<TableSchema>> {
        self.history.get(&id)
    }

    fn relation_name_taken(&self, name: &str) -> bool {
        self.table_names.contains_key(name) || self.index_names.contains_key(name)
    }

    /// Validates `def` and returns the resolved table plus its indexes and
    /// foreign keys, without changing `self`.
    pub(crate) fn plan_create_table(&self, def: &TableDef) -> Result<(TableSchema, Vec<IndexSchema>, Vec<ForeignKey>)> {
        if self.relation_name_taken(&def.name) {
            return Err(EngineError::DuplicateTable { name: def.name.clone() });
        }
        validate_columns(def)?;
        let id = TableId(self.next_table_id);
        let mut index_id = self.next_index_id;
        let mut next_index = || {
            let out = IndexId(index_id);
            index_id += 1;
            out
        };
        let mut columns = self.plan_columns(def)?;
        let rowid = def.primary_key.is_empty();
        let pk = if rowid {
            columns.push(Column {
                name: ROWID_COLUMN.to_owned(),
                ty: DataType::Int8,
                nullable: false,
                default: None,
                sequence: None,
                default_sql: None,
            });
            vec![columns.len() - 1]
        } else {
            resolve_columns(&def.name, &columns, &def.primary_key)?
        };
        for &c in &pk {
            columns[c].nullable = false; // PRIMARY KEY implies NOT NULL, as in PostgreSQL.
        }
        let primary_index = next_index();
        let mut indexes = vec![IndexSchema {
            id: primary_index,
            name: format!("{}_pkey", def.name),
            table: id,
            columns: pk.clone(),
            unique: true,
            primary: true,
            // Nobody range-scans a row id: the hash index alone serves it.
            ordered: def.primary_key_ordered && !rowid,
            include: Vec::new(),
            options: IndexOptions::default(),
        }];
        for (name, cols) in &def.unique {
            let cols_idx = resolve_columns(&def.name, &columns, cols)?;
            let name = name.clone().unwrap_or_else(|| format!("{}_{}_key", def.name, cols.join("_")));
            indexes.push(IndexSchema {
                id: next_index(),
                name,
                table: id,
                columns: cols_idx,
                unique: true,
                primary: false,
                ordered: true,
                include: Vec::new(),
                options: IndexOptions::default(),
            });
        }
        let layout = RowLayout::new(&columns.iter().map(|c| c.ty).collect::<Vec<_>>());
        let checks = sorted_checks(def)?;
        let table = TableSchema {
            id,
            name: def.name.clone(),
            columns,
            primary_key: pk,
            primary_index,
            sequence: def.sequence.clone(),
            checks,
            annotation: def.annotation.clone(),
            dropped_attnums: Vec::new(),
            layout,
        };
        let mut fks = Vec::new();
        for (n, fk) in def.foreign_keys.iter().enumerate() {
            let planned = self.plan_foreign_key(&table, &indexes, fk, ForeignKeyId(self.next_fk_id + n as u32))?;
            let child_index = match find_leading_index(&indexes, &planned.child_columns) {
                Some(existing) => existing,
                None => {
                    let idx = IndexSchema {
                        id: next_index(),
                        name: format!("{}_idx", planned.name),
                        table: id,
                        columns: planned.child_columns.clone(),
                        unique: false,
                        primary: false,
                        ordered: true,
                        include: Vec::new(),
                        options: IndexOptions::default(),
                    };
                    let idx_id = idx.id;
                    indexes.push(idx);
                    idx_id
                }
            };
            fks.push(ForeignKey { child_index, ..planned });
        }
        let mut names: Vec<&str> = indexes.iter().map(|i| i.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) || indexes.iter().any(|i| self.relation_name_taken(&i.name)) {
            let dup = indexes.iter().map(|i| i.name.clone()).find(|n| self.relation_name_taken(n));
            return Err(EngineError::DuplicateTable { name: dup.unwrap_or_else(|| names.join(",")) });
        }
        Ok((table, indexes, fks))
    }

    /// The columns `def` declares, with defaults coerced to their types and
    /// the sequences their defaults draw from resolved.
    fn plan_columns(&self, def: &TableDef) -> Result<Vec<Column>> {
        def.columns
            .iter()
            .map(|c| {
                let default = match &c.default {
                    Some(v) => Some(coerce(v.clone(), c.ty, &c.name)?),
                    None => None,
                };
                let sequence = match &c.sequence {
                    None => None,
                    Some((seq, how)) => Some((self.column_sequence(seq, c)?, *how)),
                };
                Ok(Column {
                    name: c.name.clone(),
                    ty: c.ty,
                    nullable: c.nullable,
                    default,
                    sequence,
                    default_sql: c.default_sql.clone(),
                })
            })
            .collect()
    }

    /// The sequence a column's default draws from: it must exist and be a
    /// sequence, and an owned one may belong to only one column.
    fn column_sequence(&self, name: &str, column: &ColumnDef) -> Result<TableId> {
        let seq = self.table_by_name(name).ok_or_else(|| EngineError::UndefinedTable { name: name.to_owned() })?;
        if seq.sequence.is_none() {
            return Err(EngineError::definition("42809", format!("\"{name}\" is not a sequence")));
        }
        if !matches!(column.ty, DataType::Int2 | DataType::Int4 | DataType::Int8) {
            return Err(match column.sequence {
                Some((_, SequenceDefault::IdentityAlways | SequenceDefault::IdentityByDefault)) => {
                    EngineError::definition("22023", "identity column type must be smallint, integer, or bigint")
                }
                _ => EngineError::definition(
                    "0A000",
                    format!("a sequence default on column \"{}\" of type {}", column.name, column.ty.pg_name()),
                ),
            });
        }
        Ok(seq.id)
    }

    /// Columns of live tables whose default draws from `sequence`.
    pub fn sequence_users(&self, sequence: TableId) -> Vec<(Arc<TableSchema>, usize)> {
        let mut out = Vec::new();
        for t in self.tables.values() {
            for (i, c) in t.columns.iter().enumerate() {
                if c.sequence.is_some_and(|(s, _)| s == sequence) {
                    out.push((Arc::clone(t), i));
                }
            }
        }
        out
    }

    fn plan_foreign_key(
        &self,
        child: &TableSchema,
        child_indexes: &[IndexSchema],
        fk: &ForeignKeyDef,
        id: ForeignKeyId,
    ) -> Result<ForeignKey> {
        let child_columns = resolve_columns(&child.name, &child.columns, &fk.columns)?;
        let self_ref = fk.parent_table == child.name;
        let (parent_id, parent_cols_all, parent_name) = if self_ref {
            (child.id, &child.columns, child.name.clone())
        } else {
            let parent = self
                .table_by_name(&fk.parent_table)
                .ok_or_else(|| EngineError::UndefinedTable { name: fk.parent_table.clone() })?;
            (parent.id, &parent.columns, parent.name.clone())
        };
        let parent_columns = if fk.parent_columns.is_empty() {
            let parent = if self_ref { Some(child) } else { self.table(parent_id).map(Arc::as_ref) };
            match parent {
                Some(p) if p.has_rowid() => {
                    return Err(EngineError::definition(
                        "42704",
                        format!("there is no primary key for referenced table \"{parent_name}\""),
                    ));
                }
                Some(p) => p.primary_key.clone(),
                None => Vec::new(),
            }
        } else {
            resolve_columns(&parent_name, parent_cols_all, &fk.parent_columns)?
        };
        if parent_columns.len() != child_columns.len() {
            return Err(EngineError::definition(
                "42830",
                "number of referencing and referenced columns for foreign key disagree",
            ));
        }
        for (&c, &p) in child_columns.iter().zip(&parent_columns) {
            let (ct, pt) = (child.columns[c].ty, parent_cols_all[p].ty);
            if !key_types_compatible(ct, pt) {
                return Err(EngineError::definition(
                    "42804",
                    format!(
                        "foreign key constraint cannot be implemented: key columns \"{}\" and \"{}\" are of incompatible types: {} and {}",
                        child.columns[c].name,
                        parent_cols_all[p].name,
                        ct.pg_name(),
                        pt.pg_name()
                    ),
                ));
            }
        }
        let unique_match = |i: &IndexSchema| i.unique && i.columns == parent_columns;
        let parent_index = if self_ref {
            child_indexes.iter().find(|i| unique_match(i)).map(|i| i.id)
        } else {
            self.indexes.values().find(|i| i.table == parent_id && unique_match(i)).map(|i| i.id)
        };
        let parent_index = parent_index.ok_or_else(|| {
            EngineError::definition(
                "42830",
                format!("there is no unique constraint matching given keys for referenced table \"{parent_name}\""),
            )
        })?;
        let name = fk.name.clone().unwrap_or_else(|| format!("{}_{}_fkey", child.name, fk.columns.join("_")));
        Ok(ForeignKey {
            id,
            name,
            child: child.id,
            child_columns,
            parent: parent_id,
            parent_columns,
            parent_index,
            child_index: IndexId(u32::MAX),
            on_delete: fk.on_delete,
            timing: fk.timing,
        })
    }

    /// Plans ALTER TABLE's new table on a catalog the old one is already
    /// removed from (the altering transaction's private copy): the table
    /// of `alter.def` with its implied indexes, then `alter.indexes`, and
    /// `referencing` (other tables' foreign keys to the old table) pointed
    /// at the new one, with the same ids.
    pub(crate) fn plan_alter_table(
        &self,
        alter: &AlterTableDef,
        referencing: &[Arc<ForeignKey>],
    ) -> Result<(TableSchema, Vec<IndexSchema>, Vec<ForeignKey>)> {
        if alter.sources.len() != alter.def.columns.len() {
            return Err(EngineError::definition("42601", "ALTER TABLE: one source per new column expected"));
        }
        let (mut table, mut indexes, mut fks) = self.plan_create_table(&alter.def)?;
        table.dropped_attnums.clone_from(&alter.dropped_attnums);
        table.dropped_attnums.sort_unstable();
        if let Some(name) = &alter.primary_key_name
            && let Some(pk) = indexes.iter_mut().find(|i| i.primary && !table.has_rowid())
            && pk.name != *name
        {
            if self.relation_name_taken(name) {
                return Err(EngineError::DuplicateTable { name: name.clone() });
            }
            pk.name.clone_from(name);
        }
        let first = indexes.iter().map(|i| i.id.0 + 1).max().unwrap_or(self.next_index_id);
        for (next, d) in (first..).zip(&alter.indexes) {
            if self.relation_name_taken(&d.name) || indexes.iter().any(|i| i.name == d.name) {
                return Err(EngineError::DuplicateTable { name: d.name.clone() });
            }
            let columns = resolve_columns(&table.name, &table.columns, &d.columns)?;
            let include = resolve_include(&table.name, &table.columns, &d.include, columns.len())?;
            indexes.push(IndexSchema {
                id: IndexId(next),
                name: d.name.clone(),
                table: table.id,
                columns,
                unique: d.unique,
                primary: false,
                ordered: true,
                include,
                options: d.options.clone(),
            });
        }
        for fk in referencing {
            let child = self
                .table(fk.child)
                .ok_or_else(|| EngineError::Corrupt(format!("foreign key {} of a missing table", fk.name)))?;
            let requires = || {
                EngineError::definition(
                    "2BP01",
                    format!(
                        "cannot alter table {} because constraint {} on table {} requires its referenced key",
                        table.name, fk.name, child.name
                    ),
                )
            };
            let parent_columns = fk
                .parent_columns
                .iter()
                .map(|&old| alter.sources.iter().position(|s| *s == Some(old)).ok_or_else(requires))
                .collect::<Result<Vec<usize>>>()?;
            for (&c, &p) in fk.child_columns.iter().zip(&parent_columns) {
                if !key_types_compatible(child.columns[c].ty, table.columns[p].ty) {
                    return Err(EngineError::definition(
                        "42804",
                        format!(
                            "foreign key constraint \"{}\" cannot be implemented: key columns \"{}\" and \"{}\" are of incompatible types: {} and {}",
                            fk.name,
                            child.columns[c].name,
                            table.columns[p].name,
                            child.columns[c].ty.pg_name(),
                            table.columns[p].ty.pg_name()
                        ),
                    ));
                }
            }
            let parent_index =
                indexes.iter().find(|i| i.unique && i.columns == parent_columns).map(|i| i.id).ok_or_else(requires)?;
            fks.push(ForeignKey {
                id: fk.id,
                name: fk.name.clone(),
                child: fk.child,
                child_columns: fk.child_columns.clone(),
                parent: table.id,
                parent_columns,
                parent_index,
                child_index: fk.child_index,
                on_delete: fk.on_delete,
                timing: fk.timing,
            });
        }
        Ok((table, indexes, fks))
    }

    pub(crate) fn plan_create_index(&self, def: &IndexDef) -> Result<IndexSchema> {
        if self.relation_name_taken(&def.name) {
            return Err(EngineError::DuplicateTable { name: def.name.clone() });
        }
        let table =
            self.table_by_name(&def.table).ok_or_else(|| EngineError::UndefinedTable { name: def.table.clone() })?;
        let columns = resolve_columns(&table.name, &table.columns, &def.columns)?;
        let include = resolve_include(&table.name, &table.columns, &def.include, columns.len())?;
        Ok(IndexSchema {
            id: IndexId(self.next_index_id),
            name: def.name.clone(),
            table: table.id,
            columns,
            unique: def.unique,
            primary: false,
            ordered: true,
            include,
            options: def.options.clone(),
        })
    }

    /// Adds a table with its indexes and foreign keys. A foreign key of
    /// another table that is listed (ALTER TABLE re-pointing it at this
    /// table) replaces the one with its id.
    pub(crate) fn add_table(
        &mut self,
        table: Arc<TableSchema>,
        indexes: Vec<Arc<IndexSchema>>,
        fks: Vec<Arc<ForeignKey>>,
    ) {
        assert!(!self.tables.contains_key(&table.id), "table id reused");
        self.next_table_id = self.next_table_id.max(table.id.0 + 1);
        self.table_names.insert(table.name.clone(), table.id);
        self.names_changed();
        self.history.insert(table.id, table.clone());
        self.tables.insert(table.id, table);
        for index in indexes {
            self.add_index(index);
        }
        for fk in fks {
            self.next_fk_id = self.next_fk_id.max(fk.id.0 + 1);
            self.foreign_keys.insert(fk.id, fk);
        }
    }

    pub(crate) fn add_index(&mut self, index: Arc<IndexSchema>) {
        assert!(!self.indexes.contains_key(&index.id), "index id reused");
        self.next_index_id = self.next_index_id.max(index.id.0 + 1);
        self.index_names.insert(index.name.clone(), index.id);
        self.names_changed();
        self.indexes.insert(index.id, index);
    }

    pub(crate) fn remove_table(&mut self, id: TableId) -> Option<Arc<TableSchema>> {
        let table = self.tables.remove(&id)?;
        self.table_names.remove(&table.name);
        self.names_changed();
        let dead: Vec<IndexId> = self.indexes.values().filter(|i| i.table == id).map(|i| i.id).collect();
        for index in dead {
            self.remove_index(index);
        }
        self.foreign_keys.retain(|_, fk| fk.child != id);
        Some(table)
    }

    /// Replaces a live table's annotation; false if there is no such table.
    pub(crate) fn set_annotation(&mut self, id: TableId, annotation: Option<String>) -> bool {
        let Some(old) = self.tables.get(&id) else { return false };
        let table = Arc::new(TableSchema { annotation, ..TableSchema::clone(old) });
        self.history.insert(id, Arc::clone(&table));
        self.tables.insert(id, table);
        self.names_changed();
        true
    }

    pub(crate) fn remove_index(&mut self, id: IndexId) -> Option<Arc<IndexSchema>> {
        let index = self.indexes.remove(&id)?;
        self.index_names.remove(&index.name);
        self.names_changed();
        Some(index)
    }

    // ---- serialization (checkpoints and DDL WAL records) ----

    pub(crate) fn encode(&self, w: &mut Writer<'_>) {
        w.u32(self.next_table_id);
        w.u32(self.next_index_id);
        w.u32(self.next_fk_id);
        w.u32(len_u32(self.history.len()));
        for table in self.history.values() {
            encode_table(w, table);
            w.bool(self.tables.contains_key(&table.id));
        }
        w.u32(len_u32(self.indexes.len()));
        for index in self.indexes.values() {
            encode_index(w, index);
        }
        w.u32(len_u32(self.foreign_keys.len()));
        for fk in self.foreign_keys.values() {
            encode_fk(w, fk);
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>, format: Format) -> Result<Catalog> {
        let mut catalog =
            Catalog { next_table_id: r.u32()?, next_index_id: r.u32()?, next_fk_id: r.u32()?, ..Catalog::default() };
        catalog.names_changed();
        let (next_table, next_index, next_fk) = (catalog.next_table_id, catalog.next_index_id, catalog.next_fk_id);
        for _ in 0..r.u32()? {
            let table = Arc::new(decode_table(r, format)?);
            let live = r.bool()?;
            catalog.history.insert(table.id, table.clone());
            if live {
                catalog.table_names.insert(table.name.clone(), table.id);
                catalog.tables.insert(table.id, table);
            }
        }
        for _ in 0..r.u32()? {
            catalog.add_index(Arc::new(decode_index(r, format)?));
        }
        for _ in 0..r.u32()? {
            let fk = decode_fk(r, format)?;
            catalog.foreign_keys.insert(fk.id, Arc::new(fk));
        }
        catalog.next_table_id = next_table;
        catalog.next_index_id = catalog.next_index_id.max(next_index);
        catalog.next_fk_id = next_fk;
        Ok(catalog)
    }
}

/// Which layout encoded catalog items use. V1 (before sequences), V2
/// (before table annotations), V3 (before dropped attribute numbers), V4
/// (before index options) and V5 (before foreign key timing) are still
/// read, from older checkpoints and WAL; everything new is written as V6.
/// Each version appends fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Format {
    V1,
    V2,
    V3,
    V4,
    V5,
    V6,
}

fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `def`'s CHECK constraints in name order; two of one name are refused
/// (42710), as PostgreSQL refuses them.
fn sorted_checks(def: &TableDef) -> Result<Vec<CheckDef>> {
    let mut checks = def.checks.clone();
    checks.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = checks.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(EngineError::definition(
            "42710",
            format!("constraint \"{}\" for relation \"{}\" already exists", w[0].name, def.name),
        ));
    }
    Ok(checks)
}

fn validate_columns(def: &TableDef) -> Result<()> {
    // A table without a primary key also stores the hidden row id.
    if def.columns.is_empty() || def.columns.len() + usize::from(def.primary_key.is_empty()) > COLUMNS_MAX {
        return Err(EngineError::ProgramLimitExceeded {
            message: format!("tables can have at most {COLUMNS_MAX} columns"),
        });
    }
    for (i, c) in def.columns.iter().enumerate() {
        c.ty.validate()?;
        if def.columns[..i].iter().any(|o| o.name == c.name) {
            return Err(EngineError::definition("42701", format!("column \"{}\" specified more than once", c.name)));
        }
        if SYSTEM_COLUMNS.contains(&c.name.as_str()) {
            return Err(EngineError::definition(
                "42701",
                format!("column name \"{}\" conflicts with a system column name", c.name),
            ));
        }
        let defaults =
            usize::from(c.default.is_some()) + usize::from(c.sequence.is_some()) + usize::from(c.default_sql.is_some());
        if defaults > 1 {
            return Err(EngineError::definition(
                "42601",
                format!("multiple default values specified for column \"{}\" of table \"{}\"", c.name, def.name),
            ));
        }
    }
    Ok(())
}

fn resolve_columns(table: &str, columns: &[Column], names: &[String]) -> Result<Vec<usize>> {
    if names.is_empty() || names.len() > KEY_COLUMNS_MAX {
        return Err(EngineError::ProgramLimitExceeded {
            message: format!("cannot use more than {KEY_COLUMNS_MAX} columns in an index"),
        });
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let idx = columns
            .iter()
            .position(|c| &c.name == name)
            .ok_or_else(|| EngineError::UndefinedColumn { table: table.to_owned(), column: name.clone() })?;
        if out.contains(&idx) {
            return Err(EngineError::definition("42701", format!("column \"{name}\" appears twice in key")));
        }
        out.push(idx);
    }
    Ok(out)
}

/// INCLUDE columns by position; they count toward PostgreSQL's limit of
/// columns in an index with the key.
fn resolve_include(table: &str, columns: &[Column], names: &[String], key_count: usize) -> Result<Vec<usize>> {
    if key_count + names.len() > KEY_COLUMNS_MAX {
        return Err(EngineError::ProgramLimitExceeded {
            message: format!("cannot use more than {KEY_COLUMNS_MAX} columns in an index"),
        });
    }
    names
        .iter()
        .map(|name| {
            columns
                .iter()
                .position(|c| &c.name == name)
                .ok_or_else(|| EngineError::UndefinedColumn { table: table.to_owned(), column: name.clone() })
        })
        .collect()
}

fn key_types_compatible(a: DataType, b: DataType) -> bool {
    use DataType::*;
    let class = |t: DataType| match t {
        Int2 | Int4 | Int8 => 1,
        Text | Varchar(_) | Char(_) => 2,
        Numeric { .. } => 3,
        Float4 | Float8 => 4,
        _ => 10 + t.tag().0,
    };
    // Equal key encodings are required for lookups across tables: integers
    // encode by width, so require the same width; char(n) pads, so the same n.
    class(a) == class(b) && (a == b || matches!((a, b), (Text | Varchar(_), Text | Varchar(_))))
}

fn find_leading_index(indexes: &[IndexSchema], columns: &[usize]) -> Option<IndexId> {
    indexes
        .iter()
        .find(|i| i.ordered && i.columns.len() >= columns.len() && i.columns[..columns.len()] == *columns)
        .map(|i| i.id)
}

fn encode_table(w: &mut Writer<'_>, t: &TableSchema) {
    w.u32(t.id.0);
    w.str(&t.name);
    w.u32(len_u32(t.columns.len()));
    for c in &t.columns {
        w.str(&c.name);
        let (tag, a, b) = c.ty.tag();
        w.u8(tag);
        w.u32(a);
        w.u32(b);
        w.bool(c.nullable);
        match &c.default {
            None => w.bool(false),
            Some(v) => {
                w.bool(true);
                crate::row::encode_value(w, v);
            }
        }
        match c.sequence {
            None => w.u8(0),
            Some((seq, how)) => {
                w.u8(how.tag());
                w.u32(seq.0);
            }
        }
        match &c.default_sql {
            None => w.bool(false),
            Some(sql) => {
                w.bool(true);
                w.str(sql);
            }
        }
    }
    encode_usizes(w, &t.primary_key);
    w.u32(t.primary_index.0);
    match &t.sequence {
        None => w.bool(false),
        Some(o) => {
            w.bool(true);
            w.u8(o.data_type.tag().0);
            for v in [o.start, o.increment, o.min, o.max] {
                w.u64(v as u64);
            }
            w.bool(o.cycle);
        }
    }
    w.u32(len_u32(t.checks.len()));
    for c in &t.checks {
        w.str(&c.name);
        w.str(&c.sql);
    }
    encode_annotation(w, t.annotation.as_deref());
    let dropped: Vec<usize> = t.dropped_attnums.iter().map(|&a| usize::from(a)).collect();
    encode_usizes(w, &dropped);
}

pub(crate) fn encode_annotation(w: &mut Writer<'_>, annotation: Option<&str>) {
    match annotation {
        None => w.bool(false),
        Some(a) => {
            w.bool(true);
            w.str(a);
        }
    }
}

pub(crate) fn decode_annotation(r: &mut Reader<'_>) -> Result<Option<String>> {
    Ok(if r.bool()? { Some(r.str()?) } else { None })
}

fn decode_table(r: &mut Reader<'_>, format: Format) -> Result<TableSchema> {
    let id = TableId(r.u32()?);
    let name = r.str()?;
    let mut columns = Vec::new();
    for _ in 0..r.u32()? {
        let cname = r.str()?;
        let (tag, a, b) = (r.u8()?, r.u32()?, r.u32()?);
        let ty =
            DataType::from_tag(tag, a, b).ok_or_else(|| EngineError::Corrupt(format!("unknown type tag {tag}")))?;
        let nullable = r.bool()?;
        let default = if r.bool()? { Some(crate::row::decode_value(r)?) } else { None };
        let sequence = match format {
            Format::V1 => None,
            Format::V2 | Format::V3 | Format::V4 | Format::V5 | Format::V6 => match r.u8()? {
                0 => None,
                tag => {
                    let how = SequenceDefault::from_tag(tag)
                        .ok_or_else(|| EngineError::Corrupt(format!("unknown sequence default {tag}")))?;
                    Some((TableId(r.u32()?), how))
                }
            },
        };
        let default_sql = match format {
            Format::V2 | Format::V3 | Format::V4 | Format::V5 | Format::V6 if r.bool()? => Some(r.str()?),
            _ => None,
        };
        columns.push(Column { name: cname, ty, nullable, default, sequence, default_sql });
    }
    let primary_key = decode_usizes(r)?;
    let primary_index = IndexId(r.u32()?);
    let sequence = if format >= Format::V2 && r.bool()? {
        let tag = r.u8()?;
        let data_type = DataType::from_tag(tag, 0, 0)
            .ok_or_else(|| EngineError::Corrupt(format!("unknown sequence type tag {tag}")))?;
        let mut v = [0i64; 4];
        for x in &mut v {
            *x = r.u64()? as i64;
        }
        let [start, increment, min, max] = v;
        Some(SequenceOptions { data_type, start, increment, min, max, cycle: r.bool()? })
    } else {
        None
    };
    let mut checks = Vec::new();
    if format >= Format::V2 {
        for _ in 0..r.u32()? {
            checks.push(CheckDef { name: r.str()?, sql: r.str()? });
        }
    }
    let annotation = if format >= Format::V3 { decode_annotation(r)? } else { None };
    if primary_key.iter().any(|&c| c >= columns.len()) {
        return Err(EngineError::Corrupt(format!("table {name}: key column out of range")));
    }
    let layout = RowLayout::new(&columns.iter().map(|c| c.ty).collect::<Vec<_>>());
    let dropped_attnums = if format >= Format::V4 {
        decode_usizes(r)?.into_iter().map(|a| u16::try_from(a).unwrap_or(u16::MAX)).collect()
    } else {
        Vec::new()
    };
    Ok(TableSchema {
        id,
        name,
        columns,
        primary_key,
        primary_index,
        sequence,
        checks,
        annotation,
        dropped_attnums,
        layout,
    })
}

fn encode_index(w: &mut Writer<'_>, i: &IndexSchema) {
    w.u32(i.id.0);
    w.str(&i.name);
    w.u32(i.table.0);
    encode_usizes(w, &i.columns);
    w.bool(i.unique);
    w.bool(i.primary);
    w.bool(i.ordered);
    encode_usizes(w, &i.include);
    w.u16(u16::try_from(i.options.keys.len()).unwrap_or(u16::MAX));
    for k in &i.options.keys {
        w.bool(k.descending);
        w.bool(k.nulls_first);
        encode_optional_str(w, k.opclass.as_deref());
    }
    encode_optional_str(w, i.options.predicate.as_deref());
}

fn decode_index(r: &mut Reader<'_>, format: Format) -> Result<IndexSchema> {
    let mut index = IndexSchema {
        id: IndexId(r.u32()?),
        name: r.str()?,
        table: TableId(r.u32()?),
        columns: decode_usizes(r)?,
        unique: r.bool()?,
        primary: r.bool()?,
        ordered: r.bool()?,
        include: Vec::new(),
        options: IndexOptions::default(),
    };
    if format >= Format::V5 {
        index.include = decode_usizes(r)?;
        for _ in 0..r.u16()? {
            let (descending, nulls_first) = (r.bool()?, r.bool()?);
            index.options.keys.push(IndexKeyOptions { descending, nulls_first, opclass: decode_optional_str(r)? });
        }
        index.options.predicate = decode_optional_str(r)?;
    }
    Ok(index)
}

fn encode_optional_str(w: &mut Writer<'_>, v: Option<&str>) {
    w.bool(v.is_some());
    if let Some(v) = v {
        w.str(v);
    }
}

fn decode_optional_str(r: &mut Reader<'_>) -> Result<Option<String>> {
    if r.bool()? { r.str().map(Some) } else { Ok(None) }
}

fn encode_fk(w: &mut Writer<'_>, f: &ForeignKey) {
    w.u32(f.id.0);
    w.str(&f.name);
    w.u32(f.child.0);
    encode_usizes(w, &f.child_columns);
    w.u32(f.parent.0);
    encode_usizes(w, &f.parent_columns);
    w.u32(f.parent_index.0);
    w.u32(f.child_index.0);
    w.u8(f.on_delete.tag());
    w.u8(f.timing.tag());
}

fn decode_fk(r: &mut Reader<'_>, format: Format) -> Result<ForeignKey> {
    let (id, name, child, child_columns) = (ForeignKeyId(r.u32()?), r.str()?, TableId(r.u32()?), decode_usizes(r)?);
    let (parent, parent_columns, parent_index, child_index) =
        (TableId(r.u32()?), decode_usizes(r)?, IndexId(r.u32()?), IndexId(r.u32()?));
    let on_delete = match format {
        Format::V1 => FkAction::NoAction,
        Format::V2 | Format::V3 | Format::V4 | Format::V5 | Format::V6 => match r.u8()? {
            0 => FkAction::NoAction,
            1 => FkAction::Cascade,
            2 => FkAction::SetNull,
            tag => return Err(EngineError::Corrupt(format!("unknown foreign key action {tag}"))),
        },
    };
    let timing = if format >= Format::V6 {
        match r.u8()? {
            0 => FkTiming::Immediate,
            1 => FkTiming::DeferrableImmediate,
            2 => FkTiming::DeferrableDeferred,
            tag => return Err(EngineError::Corrupt(format!("unknown foreign key timing {tag}"))),
        }
    } else {
        FkTiming::Immediate
    };
    Ok(ForeignKey {
        id,
        name,
        child,
        child_columns,
        parent,
        parent_columns,
        parent_index,
        child_index,
        on_delete,
        timing,
    })
}

fn encode_usizes(w: &mut Writer<'_>, v: &[usize]) {
    w.u16(u16::try_from(v.len()).unwrap_or(u16::MAX));
    for &x in v {
        w.u16(u16::try_from(x).unwrap_or(u16::MAX));
    }
}

fn decode_usizes(r: &mut Reader<'_>) -> Result<Vec<usize>> {
    let n = r.u16()?;
    (0..n).map(|_| Ok(usize::from(r.u16()?))).collect()
}

/// A CREATE TABLE as logged: the table with its indexes and foreign keys.
pub(crate) struct TableDdl {
    pub(crate) table: Arc<TableSchema>,
    pub(crate) indexes: Vec<Arc<IndexSchema>>,
    pub(crate) foreign_keys: Vec<Arc<ForeignKey>>,
}

pub(crate) fn encode_table_ddl(w: &mut Writer<'_>, ddl: &TableDdl) {
    encode_table(w, &ddl.table);
    w.u32(len_u32(ddl.indexes.len()));
    for i in &ddl.indexes {
        encode_index(w, i);
    }
    w.u32(len_u32(ddl.foreign_keys.len()));
    for f in &ddl.foreign_keys {
        encode_fk(w, f);
    }
}

pub(crate) fn decode_table_ddl(r: &mut Reader<'_>, format: Format) -> Result<TableDdl> {
    let table = Arc::new(decode_table(r, format)?);
    let indexes = (0..r.u32()?).map(|_| decode_index(r, format).map(Arc::new)).collect::<Result<Vec<_>>>()?;
    let foreign_keys = (0..r.u32()?).map(|_| decode_fk(r, format).map(Arc::new)).collect::<Result<Vec<_>>>()?;
    Ok(TableDdl { table, indexes, foreign_keys })
}

pub(crate) fn encode_index_ddl(w: &mut Writer<'_>, i: &IndexSchema) {
    encode_index(w, i);
}

pub(crate) fn decode_index_ddl(r: &mut Reader<'_>, format: Format) -> Result<IndexSchema> {
    decode_index(r, format)
}
