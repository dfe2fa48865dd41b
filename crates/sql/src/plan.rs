//! Physical plans: what the executor runs.
//!
//! A SELECT is a left-deep pipeline of [`Level`]s, one per FROM relation in
//! the order written; each level finds its rows through an [`Access`] path
//! chosen from the predicates that reach it (primary-key point lookup,
//! ordered-index prefix/range scan, or full scan), so a join on a key
//! becomes an index nested-loop join. Above the pipeline: aggregation,
//! projection, DISTINCT, sort, OFFSET/LIMIT.
//!
//! Invariant: an access path only narrows which rows are read; every level
//! filter is still evaluated on the rows it returns, except for a primary-key
//! lookup whose key predicates are exact (`exact_key`). So a poor choice of
//! index can cost time but never change an answer.

use std::sync::Arc;

use pgtier_engine::{AlterTableDef, Catalog, IndexDef, IndexId, SequenceOptions, TableDef, TableId, TableSchema};

use crate::error::SqlNotice;
use pgtier_engine::{DataType, Value};

use crate::catalog::{Schema, SystemRel};
use crate::expr::Expr;
use crate::value::types::Elem;

#[derive(Clone)]
pub struct Rel {
    pub name: String,
    pub table: Arc<TableSchema>,
    pub offset: usize,
    /// Rows not stored in the engine (system catalog, subquery, table function).
    pub source: Option<Arc<VirtualSource>>,
}

impl Rel {
    /// The schema a `schema.table.column` reference must name for this
    /// FROM item: stored tables live in `public`, system relations in their
    /// catalog schema; subqueries and functions have none.
    pub(crate) fn schema_name(&self) -> Option<&str> {
        match self.source.as_deref() {
            None => Some(crate::names::split(&self.table.name).0),
            Some(VirtualSource::System(sys)) => Some(match sys.def().schema {
                Schema::PgCatalog => "pg_catalog",
                Schema::InformationSchema => "information_schema",
            }),
            Some(_) => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Access {
    /// Equality on every primary-key column.
    PkLookup {
        key: Vec<Expr>,
    },
    /// Ordered index: equality on the leading `eq` columns, then an optional
    /// range on the next column.
    IndexScan {
        index: IndexId,
        eq: Vec<Expr>,
        lower: Option<(Expr, bool)>,
        upper: Option<(Expr, bool)>,
        key_types: Vec<DataType>,
    },
    FullScan,
    /// Rows not stored in the engine: a system catalog generated from the
    /// catalog snapshot, a subquery or set operation in FROM, a table function.
    Virtual(Arc<VirtualSource>),
}

/// Rows that do not come from an engine table.
#[derive(Clone, Debug, PartialEq)]
pub enum VirtualSource {
    System(SystemRel),
    /// A subquery, VALUES list or set operation in FROM (or a top-level set
    /// operation, planned as a query over it).
    Query(SetTree),
    /// A subquery in FROM that reads the row of the query around its
    /// FROM (this query is a correlated subquery) or may read a recursive
    /// query's work table, or a set operation's own level: run for each
    /// read of the level, never kept. A `Query` reads neither: its rows
    /// are the same for the whole statement.
    Correlated(SetTree),
    /// A LATERAL subquery that reads the FROM items before it: run for
    /// each joined row so far, which its `Expr::Outer` columns read.
    Lateral(SetTree),
    /// A set-returning function in FROM; its arguments may read the
    /// relations before it (PostgreSQL's implicit LATERAL).
    Function {
        func: TableFunc,
        args: Vec<Expr>,
        ordinality: bool,
    },
    /// WITH RECURSIVE: the non-recursive term's rows, then rounds of the
    /// recursive term, each reading the previous round's rows as work
    /// table `slot`, until a round adds none (UNION drops rows seen before).
    Recursive {
        slot: usize,
        anchor: SetTree,
        step: SetTree,
        all: bool,
    },
    /// The rows of the previous round of recursive query `slot`.
    WorkTable(usize),
    /// A reference to a WITH query PostgreSQL materializes (one that calls
    /// a volatile function, or is declared MATERIALIZED): `source` runs at
    /// the statement's first read of any reference, and every reference
    /// reads those rows (kept under `id`), so random() and nextval() run
    /// once per row of the WITH query, not once per reference or per read.
    Shared {
        id: usize,
        source: Box<VirtualSource>,
    },
    /// A reference to a data-modifying WITH query: the RETURNING rows of
    /// [`ModifyingCte`] `id`, which ran before the rest of the statement
    /// (kept in `Exec::shared_ctes` under `id`).
    Returning(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub enum SetTree {
    /// Its first `visible` projection columns, already cast to the set's column types.
    Select(Box<SelectPlan>),
    Values(Vec<Vec<Expr>>),
    Op {
        op: SetOp,
        all: bool,
        left: Box<SetTree>,
        right: Box<SetTree>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Union,
    Intersect,
    Except,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableFunc {
    GenerateSeries,
    Unnest(Elem),
    /// pgtier has no partitioning: like PostgreSQL for a relation that is
    /// not a partition, no rows.
    PartitionAncestors,
    /// `information_schema._pg_expandarray(array)`: (x, n) per element,
    /// n counting from 1 (what pgJDBC's metadata queries read index keys with).
    ExpandArray(Elem),
    /// jsonb_each, jsonb_array_elements, jsonb_object_keys and their
    /// _text / json_ variants.
    Json(crate::value::json::JsonSrf),
    /// `unnest(a [, b ...])` of real arrays: row k holds every array's
    /// element k (NULL past an array's end), as many rows as the longest.
    UnnestArrays(usize),
    /// `json[b]_to_record[set](doc) AS x(col type, ...)`: a row per
    /// object (one, or one per element of the array), each column the
    /// object's key of its name converted to its type (crate::value::json).
    /// json[b]_populate_record[set] too, with each column's domain
    /// constraints (None for a column of a type that is not a domain).
    JsonToRecord(Arc<crate::value::json_record::RecordSpec>, Arc<[Option<ColumnDomain>]>),
    /// A function that returns one value (not a set) in FROM: its one
    /// argument is the bound call; one row holding its value, NULL too.
    Scalar,
}

/// The constraints a column of a domain type checks its values against.
#[derive(Clone, Debug)]
pub struct ColumnDomain {
    pub name: String,
    pub not_null: bool,
    pub checks: Vec<BoundCheck>,
}

// TableFunc is compared as plans are; a domain is its name and constraints' names.
impl PartialEq for ColumnDomain {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.not_null == other.not_null
            && self.checks.iter().map(|c| &c.name).eq(other.checks.iter().map(|c| &c.name))
    }
}

impl Eq for ColumnDomain {}

#[derive(Clone, Debug)]
pub struct Level {
    pub table: Arc<TableSchema>,
    /// Position of this table's first column in the joined row.
    pub offset: usize,
    pub access: Access,
    /// The key predicates of a PkLookup are exact: no recheck needed.
    pub exact_key: bool,
    pub left_join: bool,
    /// The right side of a FULL JOIN (`left_join` is set too): read whole
    /// once per execution; its rows no row of the level before matched are
    /// emitted, that level NULL, after that level's loop (exec/scan.rs).
    pub full_join: bool,
    /// Evaluated on each candidate row (join condition and pushed-down WHERE).
    pub filters: Vec<Expr>,
    /// Equality predicates an IndexScan's key satisfies exactly (the engine
    /// returns only rows whose visible version carries the key), so a
    /// snapshot read skips them. A row's latest version may differ from
    /// the one found: FOR UPDATE and UPDATE recheck these on it, with
    /// `filters`.
    pub key_checks: Vec<Expr>,
    /// Left join only: WHERE predicates applied after NULL-extension.
    pub post_filters: Vec<Expr>,
    /// FullScan only: equalities `column = expr` (column of this table,
    /// expr over earlier levels, the enclosing row or parameters) that let
    /// the executor find candidates in a hash table of the level's rows
    /// when the level is scanned more than once (exec/hash_join.rs). They
    /// stay in `filters`: the table only narrows the candidates.
    pub hash_keys: Vec<(usize, Expr)>,
}

impl PartialEq for Level {
    fn eq(&self, o: &Level) -> bool {
        Arc::ptr_eq(&self.table, &o.table)
            && self.offset == o.offset
            && self.access == o.access
            && self.exact_key == o.exact_key
            && self.left_join == o.left_join
            && self.full_join == o.full_join
            && self.filters == o.filters
            && self.key_checks == o.key_checks
            && self.post_filters == o.post_filters
            && self.hash_keys == o.hash_keys
    }
}

impl Level {
    pub fn width(&self) -> usize {
        self.table.columns.len()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFunc {
    CountStar,
    Count,
    Sum,
    Avg,
    Min,
    Max,
    /// bool_and / every: false below true, so min over booleans.
    BoolAnd,
    /// bool_or: max over booleans.
    BoolOr,
    /// string_agg(text, delimiter): the argument is the pair as a text array.
    StringAgg,
    /// array_agg(x): the result type is the array type.
    ArrayAgg,
    /// json_agg, jsonb_agg, json_object_agg, jsonb_object_agg.
    Json(crate::value::json::JsonAgg),
    /// variance / var_samp / var_pop / stddev / stddev_samp / stddev_pop
    /// over integers and numerics (numeric_stddev_internal), and over
    /// float4/float8 (float8_accum: exec/aggregate.rs `YoungsCramer`).
    Variance {
        sample: bool,
        stddev: bool,
    },
    /// The two-argument float8 statistics (regr_*, covar_*, corr) over
    /// float8_regr_accum's state; the argument is the (y, x) pair as an array.
    Regr(RegrFunc),
    /// An ordered-set aggregate's input (`percentile_cont(0.5) WITHIN GROUP
    /// (ORDER BY x)`): the rows sorted by `order_by`, as an array (of the
    /// values, NULLs dropped; for a hypothetical-set aggregate, of each
    /// row's keys, NULLs kept); a final function above the aggregation
    /// (exec::ordered_set) reads it.
    OrderedSet {
        hypothetical: bool,
    },
}

/// What a two-argument statistics aggregate reads of its state (float.c's finals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegrFunc {
    Count,
    Sxx,
    Syy,
    Sxy,
    AvgX,
    AvgY,
    R2,
    Slope,
    Intercept,
    CovarPop,
    CovarSamp,
    Corr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AggCall {
    pub func: AggFunc,
    pub arg: Option<Expr>,
    pub distinct: bool,
    /// `FILTER (WHERE ...)`: rows for which it is not true are skipped.
    pub filter: Option<Expr>,
    /// `array_agg(x ORDER BY ...)`: the order its input is collected in
    /// (only order-sensitive aggregates keep it).
    pub order_by: Vec<AggOrder>,
    /// Result type.
    pub ty: DataType,
}

/// What a window function computes over its partition.
#[derive(Clone, Debug, PartialEq)]
pub enum WindowFunc {
    RowNumber,
    Rank,
    DenseRank,
    /// (rank - 1) / (partition rows - 1), 0 for a single row.
    PercentRank,
    /// Rows up to the current row's last peer / partition rows.
    CumeDist,
    /// The bucket (1..=n) of n as equal as possible, earlier ones larger.
    Ntile(Expr),
    /// lag / lead: `value` of the row `offset` (default 1) before / after
    /// in the partition, else `default` (NULL).
    Shift {
        value: Expr,
        offset: Option<Expr>,
        default: Option<Expr>,
        lead: bool,
    },
    /// The frame's first row.
    FirstValue(Expr),
    /// The frame's last row.
    LastValue(Expr),
    /// The frame's n-th row (n, an integer, evaluated on the current row).
    NthValue(Expr, Expr),
    /// An aggregate over the frame (by default the partition's rows up to
    /// the current row's last peer, or the whole partition without ORDER BY).
    Agg(AggCall),
}

impl WindowFunc {
    /// Whether it reads the frame (the rank-like functions, lag, lead and
    /// ntile read the partition, whatever the frame says).
    pub fn uses_frame(&self) -> bool {
        matches!(
            self,
            WindowFunc::FirstValue(_) | WindowFunc::LastValue(_) | WindowFunc::NthValue(..) | WindowFunc::Agg(_)
        )
    }
}

/// `func OVER (PARTITION BY ... ORDER BY ... frame)`; its expressions are
/// over the row the projection sees (joined row, or aggregate row).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowCall {
    pub func: WindowFunc,
    pub partition: Vec<Expr>,
    /// (expression, descending, nulls first).
    pub order: Vec<(Expr, bool, bool)>,
    pub frame: WindowFrame,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameUnits {
    Rows,
    Range,
    Groups,
}

/// A frame bound; an offset is evaluated once per statement (PostgreSQL's
/// calculate_frame_offsets), over no row: it reads no column of the query.
#[derive(Clone, Debug, PartialEq)]
pub enum FrameBound {
    UnboundedPreceding,
    Preceding(Expr),
    CurrentRow,
    Following(Expr),
    UnboundedFollowing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameExclude {
    NoOthers,
    CurrentRow,
    Group,
    Ties,
}

/// How a RANGE offset moves a value of the one ORDER BY column: the
/// in_range support function PostgreSQL chose for the column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeOffset {
    /// smallint, integer, bigint columns (the offset an int8).
    Integer,
    Numeric,
    /// real and double precision columns (the offset a float8).
    Float,
    /// date, timestamp, timestamptz, time, timetz and interval columns (the offset an interval).
    Date,
    Timestamp,
    TimestampTz,
    Time,
    TimeTz,
    Interval,
}

#[derive(Clone, Debug, PartialEq)]
pub struct WindowFrame {
    pub units: FrameUnits,
    pub start: FrameBound,
    pub end: FrameBound,
    pub exclude: FrameExclude,
    /// Set for RANGE with an offset.
    pub range: Option<RangeOffset>,
}

impl WindowFrame {
    /// RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW.
    pub fn default_frame() -> WindowFrame {
        WindowFrame {
            units: FrameUnits::Range,
            start: FrameBound::UnboundedPreceding,
            end: FrameBound::CurrentRow,
            exclude: FrameExclude::NoOthers,
            range: None,
        }
    }

    pub fn offsets(&self) -> impl Iterator<Item = &Expr> {
        [&self.start, &self.end].into_iter().filter_map(|b| match b {
            FrameBound::Preceding(e) | FrameBound::Following(e) => Some(e),
            _ => None,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct AggPlan {
    pub group_by: Vec<Expr>,
    pub aggs: Vec<AggCall>,
    /// Over the aggregate row (groups, then aggregates).
    pub having: Option<Expr>,
}

impl AggCall {
    /// Every expression it evaluates on an input row.
    pub fn exprs(&self) -> impl Iterator<Item = &Expr> {
        self.arg.iter().chain(&self.filter).chain(self.order_by.iter().map(|o| &o.key))
    }
}

/// One key of an aggregate's ORDER BY, evaluated on the input row.
#[derive(Clone, Debug, PartialEq)]
pub struct AggOrder {
    pub key: Expr,
    pub desc: bool,
    pub nulls_first: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SortKey {
    pub column: usize,
    pub desc: bool,
    pub nulls_first: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OutputColumn {
    pub name: String,
    /// None for a column of untyped NULLs/literals (PostgreSQL shows text).
    pub ty: Option<DataType>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SelectPlan {
    pub levels: Vec<Level>,
    /// Width of the joined row.
    pub width: usize,
    /// WHERE predicates evaluated on the complete joined row (subqueries).
    pub final_filters: Vec<Expr>,
    pub agg: Option<AggPlan>,
    /// Window functions: computed over the joined (or aggregate) rows and
    /// appended to each as extra columns, which the projection reads.
    pub windows: Vec<WindowCall>,
    /// Over the joined row, or the aggregate row when `agg` is set.
    pub projection: Vec<Expr>,
    /// Leading projection columns the client sees (the rest are sort keys).
    pub visible: usize,
    pub distinct: bool,
    /// DISTINCT ON: projection positions; the first row (in ORDER BY
    /// order) of each group of equal values is kept.
    pub distinct_on: Vec<usize>,
    pub order_by: Vec<SortKey>,
    pub limit: Option<Expr>,
    /// FETCH FIRST ... WITH TIES: the rows after the limit that sort equal
    /// to the last one kept (by `order_by`) are kept too.
    pub with_ties: bool,
    pub offset: Option<Expr>,
    pub for_update: bool,
    pub columns: Vec<OutputColumn>,
    /// A single exact primary-key lookup with nothing else to do: the
    /// executor's fast path. Decided once, when planned
    /// ([`SelectPlan::decide_point_lookup`]).
    pub point_lookup: bool,
    /// The visible projection is plain columns: a point lookup decodes them
    /// straight into the result. Decided with `point_lookup`.
    pub projects_columns: bool,
    /// ORDER BY is the order the plan's one IndexScan level visits rows in
    /// (bind/select.rs `index_order`): the executor does not sort, and a
    /// LIMIT stops the scan, as PostgreSQL's Index Scan under a Limit
    /// does (TPC-C Delivery's oldest new order of a district).
    pub index_ordered: bool,
    /// Per level, the columns of its table the plan reads; the executor
    /// decodes only these. Empty (a plan not built by the binder): all.
    pub level_masks: Vec<ColumnMask>,
}

impl SelectPlan {
    /// Sets [`SelectPlan::point_lookup`]; call once the plan is complete.
    pub fn decide_point_lookup(mut self) -> SelectPlan {
        self.point_lookup = matches!(self.levels.as_slice(), [l] if matches!(l.access, Access::PkLookup { .. }) && l.exact_key && l.filters.is_empty() && l.post_filters.is_empty())
            && self.final_filters.is_empty()
            && self.agg.is_none()
            && !self.distinct
            && self.distinct_on.is_empty()
            && self.order_by.is_empty()
            && self.limit.is_none()
            && self.offset.is_none()
            && self.windows.is_empty()
            && !self.projection.iter().any(Expr::has_subquery);
        self.projects_columns =
            self.windows.is_empty() && self.projection[..self.visible].iter().all(|e| matches!(e, Expr::Column(_)));
        self.level_masks = self.columns_read_per_level();
        self
    }

    /// [`SelectPlan::level_masks`]: the joined-row columns any expression of
    /// the plan reads (index keys, filters, projection or the aggregate's
    /// inputs; the projection holds the sort keys), plus every primary key
    /// (FOR UPDATE locks rows by it). All columns when a subquery appears,
    /// since it may read the row as its outer.
    fn columns_read_per_level(&self) -> Vec<ColumnMask> {
        let mut exprs: Vec<&Expr> = Vec::new();
        for level in &self.levels {
            exprs.extend(level.filters.iter().chain(&level.post_filters));
            match &level.access {
                Access::PkLookup { key } => exprs.extend(key),
                Access::IndexScan { eq, lower, upper, .. } => {
                    exprs.extend(eq);
                    exprs.extend(lower.iter().chain(upper).map(|(e, _)| e));
                }
                // A function in FROM reads the columns of the items before it.
                Access::Virtual(source) => match source.as_ref() {
                    VirtualSource::Function { args, .. } => exprs.extend(args),
                    // Its plan's outer references are not this plan's expressions.
                    VirtualSource::Lateral(_) => return Vec::new(),
                    _ => {}
                },
                Access::FullScan => {}
            }
        }
        exprs.extend(&self.final_filters);
        match &self.agg {
            Some(agg) => {
                exprs.extend(&agg.group_by);
                exprs.extend(agg.aggs.iter().flat_map(AggCall::exprs));
                if agg.having.as_ref().is_some_and(Expr::has_subquery) || self.projection.iter().any(Expr::has_subquery)
                {
                    return Vec::new();
                }
            }
            None => {
                exprs.extend(&self.projection);
                for w in &self.windows {
                    exprs.extend(w.partition.iter().chain(w.order.iter().map(|(e, _, _)| e)));
                    match &w.func {
                        WindowFunc::Agg(call) => exprs.extend(call.exprs()),
                        WindowFunc::Ntile(e) | WindowFunc::FirstValue(e) | WindowFunc::LastValue(e) => exprs.push(e),
                        WindowFunc::NthValue(e, n) => exprs.extend([e, n]),
                        WindowFunc::Shift { value, offset, default, .. } => {
                            exprs.push(value);
                            exprs.extend(offset.as_ref().into_iter().chain(default));
                        }
                        WindowFunc::RowNumber
                        | WindowFunc::Rank
                        | WindowFunc::DenseRank
                        | WindowFunc::PercentRank
                        | WindowFunc::CumeDist => {}
                    }
                }
            }
        }
        let keys: Vec<usize> =
            self.levels.iter().flat_map(|l| l.table.primary_key.iter().map(move |&c| l.offset + c)).collect();
        let joined = ColumnMask::reading(self.width, exprs, &keys);
        self.levels.iter().map(|l| ColumnMask(joined.0[l.offset..l.offset + l.width()].into())).collect()
    }
}

/// A subquery's plan.
pub type SubPlan = SelectPlan;

#[derive(Clone, Debug, PartialEq)]
pub enum InsertSource {
    /// Each row: one expression per target column, already cast to its type.
    Values(Vec<Vec<Expr>>),
    Query(Box<SelectPlan>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum ConflictAction {
    Nothing,
    /// Assignments over the row [existing columns.., excluded columns..].
    Update {
        assignments: Vec<(usize, Expr)>,
        filter: Option<Expr>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct OnConflict {
    /// Unique indexes whose conflicts this clause handles (all when no target given).
    pub arbiters: Vec<IndexId>,
    pub action: ConflictAction,
}

#[derive(Clone, Debug)]
pub struct InsertPlan {
    pub table: Arc<TableSchema>,
    /// The row triggers it fires.
    pub triggers: TableTriggers,
    /// Target column positions, in source order.
    pub targets: Vec<usize>,
    pub source: InsertSource,
    pub on_conflict: Option<OnConflict>,
    /// Over the inserted row.
    pub returning: Vec<Expr>,
    pub columns: Vec<OutputColumn>,
    /// Columns not in `targets` whose default draws from a sequence, with
    /// that default (evaluated for each row).
    pub generated: Vec<(usize, Expr)>,
    pub checks: Vec<BoundCheck>,
    /// INSERT into a partitioned table: where each row goes (`table` is
    /// then the partitioned table, which holds no row).
    pub route: Option<Box<PartitionRoute>>,
}

/// Tuple routing of one partitioned table (PostgreSQL's
/// ExecFindPartition): the first partition whose bound holds the row's
/// key, the default partition (last, `bound` None) otherwise.
#[derive(Clone, Debug)]
pub struct PartitionRoute {
    /// The partitioned table's stored name, for the error when no
    /// partition takes the row.
    pub table: String,
    /// Its key: (expression over the row, as PostgreSQL prints it).
    pub key: Vec<(Expr, String)>,
    /// When the partitioned table is itself a partition: its partition
    /// constraint, checked first.
    pub own_constraint: Option<BoundCheck>,
    pub partitions: Vec<(Option<Expr>, RouteTarget)>,
}

impl PartitionRoute {
    /// Whether a partition it may route to has INSERT row triggers.
    pub fn has_triggers(&self) -> bool {
        self.partitions.iter().any(|(_, t)| match t {
            RouteTarget::Leaf(_, _, _, triggers) => !triggers.is_empty(),
            RouteTarget::Node(inner) => inner.has_triggers(),
        })
    }
}

#[derive(Clone, Debug)]
pub enum RouteTarget {
    /// A partition that holds rows, with its CHECK constraints (and its
    /// partition constraint when a BEFORE trigger may change the row),
    /// when its columns are in another order than the routed row's, the
    /// routed row's position of each of its columns, and its INSERT
    /// row triggers.
    Leaf(Arc<TableSchema>, Vec<BoundCheck>, Option<Vec<usize>>, TableTriggers),
    /// A partitioned partition: routed again by its own key.
    Node(Box<PartitionRoute>),
}

/// A CHECK constraint bound over its table's row; INSERT and UPDATE
/// evaluate it on each new row.
#[derive(Clone, Debug)]
pub struct BoundCheck {
    pub name: String,
    pub expr: Expr,
}

/// Which columns of a DML target's row a step reads. Rows are decoded only
/// in these columns (the rest stay NULL), so finding a row of a 33-column
/// table by a one-column WHERE decodes two columns, not 33. Every column
/// when an expression holds a subquery (it may read the row as its outer).
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnMask(Box<[bool]>);

impl ColumnMask {
    pub fn all(width: usize) -> ColumnMask {
        ColumnMask(vec![true; width].into_boxed_slice())
    }

    /// The columns `exprs` read, plus `always`.
    pub fn reading<'e>(width: usize, exprs: impl IntoIterator<Item = &'e Expr>, always: &[usize]) -> ColumnMask {
        let mut mask = vec![false; width];
        for &c in always {
            mask[c] = true;
        }
        for e in exprs {
            if e.has_subquery() {
                return ColumnMask::all(width);
            }
            e.walk(&mut |x| {
                if let Expr::Column(c) = x
                    && let Some(m) = mask.get_mut(*c)
                {
                    *m = true;
                }
            });
        }
        ColumnMask(mask.into_boxed_slice())
    }

    #[inline]
    pub fn reads(&self, column: usize) -> bool {
        self.0.get(column).copied().unwrap_or(true)
    }
}

#[derive(Clone, Debug)]
pub struct UpdatePlan {
    pub level: Level,
    /// The row triggers it fires.
    pub triggers: TableTriggers,
    /// Read while finding the target rows: WHERE and primary key.
    pub search_columns: ColumnMask,
    /// Read by the re-check and the new values (all with RETURNING).
    pub eval_columns: ColumnMask,
    /// Some new value needs a subquery (evaluated outside the engine's
    /// row callback).
    pub assignments_have_subqueries: bool,
    /// The WHERE has a subquery: not re-checked on the latest version.
    pub filters_have_subqueries: bool,
    /// Column position and its new value (evaluated on the old row, cast to the column type).
    pub assignments: Vec<(usize, Expr)>,
    pub returning: Vec<Expr>,
    pub columns: Vec<OutputColumn>,
    pub checks: Vec<BoundCheck>,
    /// `UPDATE ... FROM`: the target joined to the FROM items. Assignments,
    /// RETURNING and `join.recheck` are then over the joined row (the
    /// CHECKs over the target's part of it); `level` is the target's level
    /// of the join.
    pub from: Option<Box<DmlJoin>>,
}

#[derive(Clone, Debug)]
pub struct DeletePlan {
    pub level: Level,
    /// The row triggers it fires.
    pub triggers: TableTriggers,
    /// Read while finding the target rows: WHERE and primary key.
    pub search_columns: ColumnMask,
    pub returning: Vec<Expr>,
    pub columns: Vec<OutputColumn>,
    /// `DELETE ... USING`: as [`UpdatePlan::from`].
    pub from: Option<Box<DmlJoin>>,
}

/// The target of an UPDATE ... FROM / DELETE ... USING joined to the
/// other relations: a SELECT pipeline without projection, run to
/// completion before the first write (so its levels may be hashed and a
/// self-join reads the statement's snapshot, as PostgreSQL's does). Each
/// target row takes part once, with its first joined row in join order;
/// PostgreSQL leaves which one unspecified.
#[derive(Clone, Debug)]
pub struct DmlJoin {
    pub join: SelectPlan,
    /// The target's level: 0, or the last one (after a subquery or VALUES
    /// list, which is then evaluated once); its offset is where the
    /// target's columns start in the joined row.
    pub target_level: usize,
    /// The join's predicates that read the target's columns (the key
    /// equalities of primary-key lookups included), rechecked on the
    /// target row's latest version with the other relations' rows as
    /// found (READ COMMITTED, as PostgreSQL's EvalPlanQual). Empty when
    /// one has a subquery (it cannot run inside the engine's row callback).
    pub recheck: Vec<Expr>,
    /// Some predicate could not be rechecked: the row is written as found.
    pub recheck_skipped: bool,
}

/// MERGE (PostgreSQL 15): the source joined to the target by a left
/// join on the ON condition (source first, at offset 0; the target after
/// it, at `target_offset`), run to completion before the first write as
/// [`DmlJoin`]'s is; then each joined row in join order takes the first
/// WHEN clause of its kind whose condition holds.
#[derive(Clone, Debug)]
pub struct MergePlan {
    pub table: Arc<TableSchema>,
    pub join: SelectPlan,
    pub target_offset: usize,
    /// The ON condition over the joined row: rechecked with the clause's
    /// condition on the target row's latest version before it is written
    /// (None when either has a subquery: not rechecked).
    pub on: Option<Expr>,
    pub matched: Vec<MergeWhen>,
    pub not_matched: Vec<MergeWhen>,
    pub checks: Vec<BoundCheck>,
}

#[derive(Clone, Debug)]
pub struct MergeWhen {
    /// `AND condition`, over the joined row.
    pub condition: Option<Expr>,
    pub action: MergeAction,
}

#[derive(Clone, Debug)]
pub enum MergeAction {
    /// Target column positions and new values over the joined row.
    Update(Vec<(usize, Expr)>),
    Delete,
    /// The new row's values over the joined row (the source's columns),
    /// by target column: the listed columns and those whose default is
    /// computed per row; the rest take `TableSchema::default_row`.
    Insert(Vec<(usize, Expr)>),
    Nothing,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TxnCommand {
    Begin,
    Commit,
    Rollback,
    /// SAVEPOINT name (names folded as identifiers are).
    Savepoint(String),
    /// ROLLBACK TO [SAVEPOINT] name.
    RollbackTo(String),
    /// RELEASE [SAVEPOINT] name.
    Release(String),
}

/// ALTER TABLE: the table's new definition and, per new column, its value
/// computed from an old row (one value per old column, hidden row id
/// included); the engine rewrites the table with the rows (`exec::alter`).
#[derive(Clone, Debug)]
pub struct AlterPlan {
    /// Other tables altered first (their foreign keys dropped by CASCADE).
    pub before: Vec<AlterPlan>,
    /// None: ALTER TABLE IF EXISTS of a missing table (only the notice).
    pub table: Option<Arc<TableSchema>>,
    pub alter: AlterTableDef,
    pub fill: Vec<Expr>,
    /// The new definition's CHECK constraints, over a new row: existing
    /// rows are validated against them.
    pub checks: Vec<BoundCheck>,
    /// Owned sequences of dropped columns, dropped after the table.
    pub drop_sequences: Vec<String>,
    pub notices: Vec<SqlNotice>,
    /// The command tag (ALTER TABLE or ALTER INDEX).
    pub tag: &'static str,
}

/// A sequence CREATE TABLE makes for a serial or identity column.
#[derive(Clone, Debug)]
pub struct ColumnSequence {
    pub name: String,
    pub options: SequenceOptions,
}

#[derive(Clone, Debug)]
pub enum Plan {
    Select(SelectPlan),
    Insert(InsertPlan),
    Update(UpdatePlan),
    Delete(DeletePlan),
    Merge(Box<MergePlan>),
    /// `sequences`: those of serial and identity columns, created first.
    /// `indexes`: made with the table (CREATE TABLE (LIKE ... INCLUDING INDEXES)).
    CreateTable {
        def: TableDef,
        if_not_exists: bool,
        sequences: Vec<ColumnSequence>,
        indexes: Vec<IndexDef>,
    },
    CreateIndex {
        def: IndexDef,
        if_not_exists: bool,
    },
    /// EXPLAIN: the plan's text (`crate::explain`), one row per line, in a
    /// `QUERY PLAN` column.
    Explain {
        lines: Vec<String>,
        columns: Vec<OutputColumn>,
        /// The explained SELECT, whose path (row or columnar,
        /// exec/columnar) is known only when it runs: the settings and the
        /// copies are the session's then.
        select: Option<Box<SelectPlan>>,
    },
    /// CREATE TABLE ... PARTITION OF: `create` (a CreateTable), then the
    /// partition added to `parent`'s list (catalog/partitions.rs); when
    /// the parent has a default partition, its rows (the `guard` tables)
    /// must not fall in the new bound (`guard_bound`, over their row).
    CreatePartition {
        create: Box<Plan>,
        parent: String,
        partition: crate::catalog::partitions::Partition,
        guard: Vec<Arc<TableSchema>>,
        guard_bound: Option<Expr>,
        default_name: String,
    },
    /// ALTER TABLE parent ATTACH PARTITION: the rows of each table of
    /// `checks` (the attached table, or a partitioned one's partitions)
    /// must hold its partition constraint (over its row), then as
    /// CreatePartition without the CREATE.
    AttachPartition {
        checks: Vec<(Arc<TableSchema>, Expr)>,
        parent: String,
        partition: crate::catalog::partitions::Partition,
        guard: Vec<Arc<TableSchema>>,
        guard_bound: Option<Expr>,
        default_name: String,
    },
    /// ALTER TABLE parent DETACH PARTITION name.
    DetachPartition {
        parent: String,
        name: String,
    },
    /// UPDATE or DELETE of a partitioned table: the statement on each of
    /// its partitions, run in turn; counts add up and RETURNING rows follow
    /// each other.
    Partitioned(Vec<Plan>),
    /// CREATE TABLE AS / SELECT INTO: the table, then `query`'s rows in it.
    CreateTableAs {
        def: TableDef,
        query: Box<SelectPlan>,
        if_not_exists: bool,
    },
    /// CREATE TEMP TABLE: `create` (a CreateTable or CreateTableAs of a
    /// name in the session's temporary schema) and what COMMIT does to it.
    CreateTemp {
        create: Box<Plan>,
        on_commit: OnCommit,
    },
    CreateSequence {
        name: String,
        options: SequenceOptions,
        if_not_exists: bool,
    },
    /// DROP TABLE, or DROP SEQUENCE when `sequences`; `cascade` drops the
    /// views that use them too.
    DropTable {
        names: Vec<String>,
        if_exists: bool,
        sequences: bool,
        cascade: bool,
    },
    /// CREATE [OR REPLACE] VIEW: `def` is the view's engine table (its
    /// columns, its query in the annotation; see catalog/views.rs).
    CreateView {
        def: TableDef,
        replace: bool,
    },
    /// CREATE SCHEMA [IF NOT EXISTS] name [AUTHORIZATION role].
    CreateSchema {
        name: String,
        owner: Option<String>,
        if_not_exists: bool,
    },
    /// CREATE TYPE name AS (...) and CREATE DOMAIN (catalog/user_types.rs).
    CreateType(Box<crate::catalog::user_types::TypeDef>),
    /// DROP TYPE / DROP DOMAIN (`domain`).
    DropType {
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
        domain: bool,
    },
    /// CREATE [OR REPLACE] FUNCTION (catalog/functions.rs).
    CreateFunction(Box<crate::catalog::functions::FunctionDef>),
    /// CREATE [OR REPLACE] TRIGGER `name` on the table named `table`.
    CreateTrigger {
        table: String,
        name: String,
        doc: crate::catalog::triggers::TriggerDoc,
        replace: bool,
    },
    /// ALTER TABLE ... ENABLE / DISABLE TRIGGER: the trigger's new document.
    AlterTrigger {
        table: String,
        name: String,
        doc: crate::catalog::triggers::TriggerDoc,
    },
    /// DROP TRIGGER [IF EXISTS] (`table` empty: the table does not exist).
    DropTrigger {
        table: String,
        name: String,
        if_exists: bool,
    },
    /// CREATE [OR REPLACE] RULE `name` on the relation named `table`.
    CreateRule {
        table: String,
        name: String,
        doc: crate::catalog::rules::RuleDoc,
        replace: bool,
    },
    /// DROP RULE [IF EXISTS] (`table` empty: the relation does not exist).
    DropRule {
        table: String,
        name: String,
        if_exists: bool,
    },
    /// An INSERT / UPDATE / DELETE as its relation's rules rewrote it
    /// (bind/rules.rs): the statements in PostgreSQL's order, each seeing
    /// the ones before; the command tag is `tag`'s, the count and rows
    /// those of `plans[result]` (none: 0 and no rows).
    Rules {
        plans: Vec<Plan>,
        result: Option<usize>,
        tag: &'static str,
    },
    /// DROP FUNCTION [IF EXISTS] name[(types)], ...: each name with its
    /// argument types when they were given.
    DropFunction {
        targets: Vec<(String, Option<Vec<DataType>>)>,
        if_exists: bool,
    },
    /// DROP SCHEMA [IF EXISTS] names (they hold nothing: CASCADE or not).
    DropSchema {
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
    },
    /// DROP VIEW; `cascade` drops the views that use them too.
    DropView {
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
    },
    /// TRUNCATE: tables in deletion order (referencing tables first);
    /// `restart_identity` resets their serial and identity sequences.
    Truncate {
        tables: Vec<Arc<TableSchema>>,
        restart_identity: bool,
    },
    DropIndex {
        names: Vec<String>,
        if_exists: bool,
    },
    /// ALTER TABLE, ALTER INDEX ... RENAME TO.
    AlterTable(Box<AlterPlan>),
    Txn(TxnCommand),
    /// SET CONSTRAINTS: `which` None is ALL; `deferred` false is IMMEDIATE.
    SetConstraints {
        which: Option<Vec<pgtier_engine::ForeignKeyId>>,
        deferred: bool,
    },
    /// `local`: SET LOCAL (until the transaction block ends).
    /// `reset`: spelled RESET, which PostgreSQL tags RESET (the same as SET ... TO DEFAULT otherwise).
    Set {
        name: String,
        value: String,
        local: bool,
        reset: bool,
    },
    Show {
        name: String,
    },
    /// Accepted and ignored (e.g. SET TRANSACTION ISOLATION LEVEL READ COMMITTED).
    Noop {
        tag: &'static str,
    },
    /// Roles, privileges and ownership (exec/roles.rs).
    Dcl(Box<Dcl>),
    /// `ALTER TABLE t SET ANALYTICS ON | OFF` of table `t` (engine name),
    /// run by the session outside any transaction (session/analytics.rs).
    SetAnalytics {
        table: String,
        on: bool,
    },
}

/// Role attributes a CREATE or ALTER ROLE writes (None: not written).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleOptions {
    pub superuser: Option<bool>,
    pub createdb: Option<bool>,
    pub createrole: Option<bool>,
    pub inherit: Option<bool>,
    pub login: Option<bool>,
    pub replication: Option<bool>,
    pub bypassrls: Option<bool>,
    pub connection_limit: Option<i32>,
    /// Some(None): PASSWORD NULL.
    pub password: Option<Option<String>>,
    pub valid_until: Option<Option<String>>,
}

/// What a GRANT or REVOKE of privileges is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantTarget {
    /// Stored relation names, with what each is.
    Relations(Vec<(String, crate::catalog::roles::ObjectKind)>),
    /// ALL TABLES / ALL SEQUENCES IN SCHEMA: resolved when it runs.
    AllInSchemas {
        schemas: Vec<String>,
        sequences: bool,
    },
    Schemas(Vec<String>),
    Database(String),
}

/// Roles, privileges and ownership: the statements of PostgreSQL's DCL.
#[derive(Clone, Debug)]
pub enum Dcl {
    CreateRole {
        name: String,
        if_not_exists: bool,
        options: RoleOptions,
        /// IN ROLE: roles the new one becomes a member of.
        in_roles: Vec<String>,
        /// ROLE / USER: roles that become members of it; ADMIN: with admin option.
        members: Vec<String>,
        admins: Vec<String>,
    },
    AlterRole {
        name: String,
        options: RoleOptions,
    },
    RenameRole {
        from: String,
        to: String,
    },
    DropRoles {
        names: Vec<String>,
        if_exists: bool,
    },
    /// GRANT / REVOKE privileges (`privs` None: ALL); grantee "" is PUBLIC.
    Privileges {
        grant: bool,
        privs: Option<crate::catalog::roles::Privs>,
        target: GrantTarget,
        grantees: Vec<String>,
        /// GRANT ... WITH GRANT OPTION; REVOKE GRANT OPTION FOR.
        grant_option: bool,
        cascade: bool,
    },
    /// GRANT / REVOKE role membership.
    Membership {
        grant: bool,
        roles: Vec<String>,
        grantees: Vec<String>,
        admin: bool,
    },
    /// SET [LOCAL] ROLE name | NONE (None); `reset`: written RESET ROLE
    /// (the same change, answered with PostgreSQL's tag RESET).
    SetRole {
        role: Option<String>,
        local: bool,
        reset: bool,
    },
    /// SET SESSION AUTHORIZATION name | DEFAULT (None); `reset`: written
    /// RESET SESSION AUTHORIZATION.
    SetSessionAuthorization {
        role: Option<String>,
        local: bool,
        reset: bool,
    },
    /// ALTER TABLE / VIEW / SEQUENCE ... OWNER TO.
    AlterOwner {
        relation: String,
        kind: crate::catalog::roles::ObjectKind,
        owner: String,
    },
}

/// What COMMIT does to a temporary table (CREATE TEMP TABLE ... ON COMMIT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCommit {
    PreserveRows,
    DeleteRows,
    Drop,
}

/// A data-modifying WITH query (INSERT / UPDATE / DELETE in WITH): it runs
/// once, to its end, before the statement's primary query, and its
/// RETURNING rows are what references to it read (`VirtualSource::Returning`).
#[derive(Clone, Debug)]
pub struct ModifyingCte {
    /// The WITH query's id: the key of its rows in `Exec::shared_ctes`.
    pub id: usize,
    /// Plan::Insert, Plan::Update or Plan::Delete.
    pub plan: Plan,
}

/// A plan plus what it was planned against.
#[derive(Debug)]
pub struct Prepared {
    pub plan: Plan,
    /// The data-modifying WITH queries, in the order they run (each after
    /// those it reads), all before `plan`.
    pub modifying: Vec<ModifyingCte>,
    /// Privileges the plan needs on relations, checked at each run
    /// (catalog/roles.rs `check_relations`).
    pub perms: Vec<crate::catalog::roles::RelationPerm>,
    /// Resolved type of each `$n`.
    pub param_types: Vec<DataType>,
    /// Tables the plan read the schema of; it is stale once any changed.
    pub deps: Vec<Arc<TableSchema>>,
    pub indexes: Vec<IndexId>,
    /// Date/time input read the transaction clock while binding (`'now'`):
    /// the plan holds that instant, so it is not cached by text.
    pub reads_clock: bool,
    /// The search_path setting the names were resolved under (None: no
    /// name depends on it); under another path the plan is bound again,
    /// as PostgreSQL re-plans a cached plan when search_path changes.
    pub search_path: Option<Arc<str>>,
    /// `Catalog::names_stamp` of the catalog the names were resolved in: a
    /// statement cached by text is bound afresh once tables or indexes came
    /// or went (a new temporary table may shadow the one it read).
    pub names_stamp: u64,
}

impl Prepared {
    /// True when the plan's names were resolved under search path `raw`.
    #[inline]
    pub fn bound_under(&self, raw: &Arc<str>) -> bool {
        self.search_path.as_ref().is_none_or(|p| Arc::ptr_eq(p, raw) || **p == **raw)
    }

    /// True while every table and index the plan uses is unchanged.
    pub fn is_current(&self, catalog: &Catalog) -> bool {
        self.deps.iter().all(|t| catalog.table(t.id).is_some_and(|c| Arc::ptr_eq(c, t)))
            && self.indexes.iter().all(|i| catalog.index(*i).is_some())
    }

    pub fn columns(&self) -> &[OutputColumn] {
        match &self.plan {
            // Columns past `visible` are ORDER BY keys the client never sees.
            Plan::Select(s) => &s.columns[..s.visible],
            Plan::Insert(i) => &i.columns,
            Plan::Update(u) => &u.columns,
            Plan::Delete(d) => &d.columns,
            Plan::Partitioned(plans) => plans.first().map_or(&[], |p| match p {
                Plan::Update(u) => &u.columns[..],
                Plan::Delete(d) => &d.columns[..],
                _ => &[],
            }),
            Plan::Rules { plans, result: Some(k), .. } => match &plans[*k] {
                Plan::Select(s) => &s.columns[..s.visible],
                Plan::Insert(i) => &i.columns,
                Plan::Update(u) => &u.columns,
                Plan::Delete(d) => &d.columns,
                _ => &[],
            },
            Plan::Explain { columns, .. } => columns,
            _ => &[],
        }
    }
}

pub fn table_ids(deps: &[Arc<TableSchema>]) -> Vec<TableId> {
    deps.iter().map(|t| t.id).collect()
}

/// A constant's value, if `e` is one.
pub fn const_value(e: &Expr) -> Option<&Value> {
    match e {
        Expr::Const(v) => Some(v),
        _ => None,
    }
}

/// A PL/pgSQL function as bound for one calling statement
/// (bind/plpgsql.rs): its variables are slots (the arguments first), read
/// by its expressions and statements as parameters `$k`.
#[derive(Debug)]
pub struct PlProgram {
    pub name: String,
    /// The type of each slot (arguments, FOUND, then the variables).
    pub slots: Vec<pgtier_engine::DataType>,
    /// The slot of FOUND.
    pub found: usize,
    pub body: PlBlock,
    /// The function's result type; a trigger function's is None.
    pub ret: Option<pgtier_engine::DataType>,
}

/// A program shared by the calls of one bound statement; equal when it is
/// the same program.
#[derive(Clone, Debug)]
pub struct PlRef(pub Arc<PlProgram>);

impl PartialEq for PlRef {
    fn eq(&self, other: &PlRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[derive(Debug)]
pub struct PlBlock {
    pub label: Option<String>,
    /// Each variable's initialization, in declaration order: slot,
    /// default (NULL without one), NOT NULL.
    pub init: Vec<(usize, Option<PlExpr>, bool, String)>,
    pub body: Vec<PlStmt>,
    pub handlers: Vec<PlHandler>,
    /// The SQLSTATE and SQLERRM slots the handlers read.
    pub error_slots: Option<(usize, usize)>,
}

#[derive(Debug)]
pub struct PlHandler {
    /// SQLSTATEs (a class's ends in 000) or `others`.
    pub codes: Vec<&'static str>,
    pub body: Vec<PlStmt>,
}

/// An expression of the program: bound as `SELECT expr`; a query without
/// FROM, aggregates or clauses is evaluated as its one expression.
#[derive(Debug)]
pub enum PlExpr {
    Expr(Expr),
    Query(Box<SelectPlan>),
}

#[derive(Debug)]
pub enum PlLoop {
    Plain,
    While(PlExpr),
    Range {
        slot: usize,
        reverse: bool,
        lo: PlExpr,
        hi: PlExpr,
        step: Option<PlExpr>,
    },
    /// The rows of `query`, each assigned to the target slots by `assign`
    /// (over the row, casting to each slot's type).
    Query {
        query: Box<SelectPlan>,
        assign: Vec<(usize, Expr)>,
    },
}

/// An SQL statement's INTO: each target slot and its value over the
/// statement's result row.
#[derive(Debug)]
pub struct PlInto {
    pub strict: bool,
    pub assign: Vec<(usize, Expr)>,
}

#[derive(Debug)]
pub enum PlStmt {
    Assign {
        slot: usize,
        expr: PlExpr,
        not_null: Option<String>,
    },
    If {
        arms: Vec<(PlExpr, Vec<PlStmt>)>,
        otherwise: Vec<PlStmt>,
    },
    Loop {
        label: Option<String>,
        kind: PlLoop,
        body: Vec<PlStmt>,
    },
    Exit {
        cont: bool,
        label: Option<String>,
        when: Option<PlExpr>,
    },
    /// RETURN: the value (cast to the result type); a trigger function's
    /// NEW / OLD / NULL is `PlReturn::Row`.
    Return(PlReturn),
    Raise {
        level: PlLevel,
        code: &'static str,
        format: Option<String>,
        args: Vec<PlExpr>,
        options: Vec<(String, PlExpr)>,
    },
    Sql {
        plan: Box<Plan>,
        into: Option<PlInto>,
        what: &'static str,
    },
    /// GET DIAGNOSTICS slot = ROW_COUNT, ... (each slot's type).
    RowCount(Vec<(usize, pgtier_engine::DataType)>),
    Block(PlBlock),
    /// What failed to bind: raised when reached, as PostgreSQL plans a
    /// statement when it first runs it.
    Error(crate::error::SqlError),
    Null,
}

#[derive(Debug)]
pub enum PlReturn {
    Value(Option<PlExpr>),
    /// A trigger function's row: the slots of NEW or OLD, or NULL (None).
    Row(Option<Vec<usize>>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlLevel {
    /// DEBUG and LOG: not sent to the client.
    Quiet,
    Info,
    Notice,
    Warning,
    Exception,
}

/// The row triggers a write fires on its table (bind/plpgsql.rs), each
/// list in name order, as PostgreSQL fires them.
#[derive(Clone, Debug, Default)]
pub struct TableTriggers {
    pub before: Vec<BoundTrigger>,
    pub after: Vec<BoundTrigger>,
}

impl TableTriggers {
    pub fn is_empty(&self) -> bool {
        self.before.is_empty() && self.after.is_empty()
    }

    /// Whether write `plan` fires row triggers: its table's, a routed
    /// row's partition's, or a partitioned table's partitions'.
    pub fn fired_by(plan: &Plan) -> bool {
        match plan {
            Plan::Insert(i) => !i.triggers.is_empty() || i.route.as_ref().is_some_and(|r| r.has_triggers()),
            Plan::Update(u) => !u.triggers.is_empty(),
            Plan::Delete(d) => !d.triggers.is_empty(),
            Plan::Partitioned(plans) => plans.iter().any(TableTriggers::fired_by),
            _ => false,
        }
    }
}

/// A trigger bound for one statement: its function's program over the
/// table's row type.
#[derive(Clone, Debug)]
pub struct BoundTrigger {
    pub name: String,
    pub program: PlRef,
    /// The table's column of each NEW / OLD field (its visible columns).
    pub columns: Vec<usize>,
    pub table_name: String,
    pub schema_name: String,
}
