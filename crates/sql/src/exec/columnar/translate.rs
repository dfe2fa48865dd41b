//! A SELECT plan's join, filters and aggregation as SQL text for the
//! analytic executor (DataFusion, crates/olap), or the reason it cannot be.
//!
//! The rule that makes an answer exact: every node is translated only
//! where DataFusion computes the very value pgtier's evaluator
//! (crate::expr) computes from the same input values, type for type, and
//! is refused otherwise. So the translation tracks each expression's
//! [`Kind`] (the engine value it yields, a numeric's scale included) and
//! casts where the two would differ; anything whose semantics differ or
//! are not checked here (integer overflow, numeric division and rounding,
//! floats, time zones, collations other than byte order, most functions)
//! is refused, and the statement runs on the row path. What pgtier keeps
//! (crate::exec::select): HAVING, windows, the projection, DISTINCT, ORDER
//! BY, LIMIT, and avg's division; DataFusion hands back the joined rows or
//! the groups the row path would have built.

use std::fmt::Write as _;

use pgtier_engine::{DataType, TableSchema, Value};
use pgtier_olap::SideTable;

use super::aggregate::Finish;
use crate::expr::registry::CallData;
use crate::expr::{CmpOp, DateField, Expr, Func, Subquery, SubqueryKind};
use crate::plan::{Access, Level, SelectPlan, SetTree, VirtualSource};
use crate::value::ArithOp;

/// The engine value an expression yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A NULL constant: takes any kind.
    Null,
    Bool,
    Int2,
    Int4,
    Int8,
    /// A numeric whose every value has this scale.
    Num(u8),
    Text,
    Date,
    Timestamp,
}

impl Kind {
    pub(super) fn of_type(ty: DataType) -> Option<Kind> {
        Some(match ty {
            DataType::Bool => Kind::Bool,
            DataType::Int2 => Kind::Int2,
            DataType::Int4 => Kind::Int4,
            DataType::Int8 => Kind::Int8,
            DataType::Numeric { scale, .. } if !ty.numeric_own_scale() => Kind::Num(u8::try_from(scale).ok()?),
            DataType::Text | DataType::Varchar(_) | DataType::Char(_) => Kind::Text,
            DataType::Date => Kind::Date,
            DataType::Timestamp(_) => Kind::Timestamp,
            _ => return None,
        })
    }

    pub(super) fn is_int(self) -> bool {
        matches!(self, Kind::Int2 | Kind::Int4 | Kind::Int8)
    }

    /// The SQL type a value of this kind is cast to.
    fn sql_type(self) -> &'static str {
        match self {
            Kind::Null | Kind::Text => "VARCHAR",
            Kind::Bool => "BOOLEAN",
            Kind::Int2 => "SMALLINT",
            Kind::Int4 => "INT",
            Kind::Int8 => "BIGINT",
            Kind::Num(_) => "DECIMAL",
            Kind::Date => "DATE",
            Kind::Timestamp => "TIMESTAMP",
        }
    }
}

/// Why a plan stays on the row path (EXPLAIN prints it).
pub(crate) type Refusal = String;
pub(super) type Res<T> = std::result::Result<T, Refusal>;

/// A translated expression.
#[derive(Clone, Debug)]
pub(super) struct Sql {
    pub(super) text: String,
    pub(super) kind: Kind,
    /// A numeric whose rows' scales differ (CASE or coalesce branches of
    /// different scales; `kind` has the largest): an integer expression
    /// giving each row's scale. Where the row's scale shows (a sum's
    /// result, a group key, min/max) pgtier needs it: the aggregation
    /// computes the largest one seen (aggregate.rs); elsewhere refused.
    pub(super) scale: Option<String>,
}

pub(super) fn sql(text: String, kind: Kind) -> Sql {
    Sql { text, kind, scale: None }
}

impl Sql {
    /// Each row's scale as an integer expression.
    fn scale_text(&self) -> String {
        match (&self.scale, self.kind) {
            (Some(s), _) => s.clone(),
            (None, Kind::Num(s)) => format!("CAST({s} AS BIGINT)"),
            (None, _) => "CAST(0 AS BIGINT)".into(),
        }
    }
}

/// What the caller supplies while translating: table state and the values
/// of uncorrelated subqueries (None: EXPLAIN, which runs nothing).
pub(crate) trait Context {
    /// The names of `table`'s columns in its columnar copy, in order, and
    /// the copy's rows; None: it has no copy the executor may read.
    fn copy_columns(&self, table: &TableSchema) -> Option<(Vec<String>, u64)>;
    /// The first-column values of uncorrelated subquery `sub`, or None
    /// when nothing may run (EXPLAIN): a placeholder is printed.
    fn subquery_values(&mut self, sub: &Subquery) -> Option<crate::error::Result<Vec<Value>>>;
    fn params(&self) -> &[Value];
    /// The rows of analytic query `sql` (with `sides` beside the copies)
    /// at the statement's snapshot, or None when nothing may run (EXPLAIN).
    fn analytic_rows(&mut self, sql: &str, sides: &[SideTable]) -> Option<crate::error::Result<Vec<Vec<Value>>>>;
    /// `e` (no subquery, no volatile function) evaluated by pgtier over `row`.
    fn evaluate(&mut self, e: &Expr, row: &[Value]) -> crate::error::Result<Value>;
    /// The rows of `plan` (an uncorrelated subquery in FROM) run as a
    /// statement of its own, its visible columns first, or None when
    /// nothing may run (EXPLAIN).
    fn derived_rows(&mut self, plan: &SelectPlan) -> Option<crate::error::Result<Vec<Vec<Value>>>>;
    /// Whether `plan` translates as a statement of its own (nothing runs).
    fn translates(&mut self, plan: &SelectPlan) -> bool;
}

/// How the executor's rows are rebuilt from the analytic answer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Shape {
    /// Joined rows of `width` columns: the answer's columns fill
    /// `positions` in order, the others (read by nothing after the join)
    /// stay NULL. A position whose `scaled` is true takes two answer
    /// columns: a numeric at its kind's fixed scale and the scale the row
    /// path gives it (a side table's average, side.rs).
    Joined { width: usize, positions: Vec<usize>, scaled: Vec<bool> },
    /// Groups: the group values, then each aggregate's answer columns,
    /// which pgtier finishes into its value.
    Groups { groups: usize, finishes: Vec<Finish> },
}

/// A plan's analytic query.
#[derive(Clone, Debug)]
pub(crate) struct Translation {
    pub sql: String,
    pub shape: Shape,
    /// The stored tables it reads (engine names).
    pub tables: Vec<String>,
    /// The most rows a level reads whole, a Seq Scan on the row path
    /// (the `auto` rule, exec/columnar).
    pub largest_scan: u64,
    /// Values pgtier computed for the query (correlated.rs), registered
    /// beside the copies under their names.
    pub sides: Vec<SideTable>,
    /// EXPLAIN's line per side table: where its rows came from.
    pub side_queries: Vec<String>,
}

/// Translates `plan` (a top-level SELECT's plan) up to its aggregation.
pub(crate) fn translate(plan: &SelectPlan, cx: &mut dyn Context) -> Res<Translation> {
    if plan.for_update {
        return Err("FOR UPDATE".into());
    }
    let mut t = Translator {
        cx,
        tables: Vec::new(),
        largest_scan: 0,
        depth: 0,
        outer: Vec::new(),
        sides: Vec::new(),
        side_queries: Vec::new(),
        from_levels: Vec::new(),
        in_where: None,
        outer_levels: Vec::new(),
    };
    let from = t.from(plan)?;
    match &plan.agg {
        Some(agg) => {
            let a = t.aggregate(agg, &from)?;
            let mut text = format!("SELECT {} FROM {}", aliased(&a.select), a.from);
            if !a.group_by.is_empty() {
                let _ = write!(text, " GROUP BY {}", a.group_by.join(", "));
                // HAVING as a filter before the groups leave DataFusion, when
                // it translates over the aggregate row (not over an average
                // pgtier finishes). The executor evaluates it again over the
                // groups that pass, the same ones (the translation is
                // exact): TPC-H Q18's 1.5 million groups come back as 57.
                if let Some(h) = &agg.having {
                    let sides = (t.sides.len(), t.side_queries.len());
                    match t.condition(h, &Cols(&a.row)) {
                        Ok(having) => {
                            let _ = write!(text, " HAVING {having}");
                        }
                        Err(_) => {
                            t.sides.truncate(sides.0);
                            t.side_queries.truncate(sides.1);
                        }
                    }
                }
            }
            let shape = Shape::Groups { groups: agg.group_by.len(), finishes: a.finishes };
            Ok(t.finish(text, shape))
        }
        None => {
            if plan.projection.iter().any(Expr::has_subquery) {
                // A subquery there may read any column of the joined row.
                return Err("a subquery in the select list".into());
            }
            let mut read = Vec::new();
            for e in &plan.projection {
                e.walk(&mut |x| {
                    if let Expr::Column(c) = x {
                        read.push(*c);
                    }
                });
            }
            if !plan.windows.is_empty() {
                return Err("window functions".into());
            }
            read.sort_unstable();
            read.dedup();
            let mut select = Vec::with_capacity(read.len());
            let mut scaled = Vec::with_capacity(read.len());
            for &c in &read {
                let column = from.column(c)?;
                select.push(column.text.clone());
                scaled.push(column.scale.is_some());
                if let Some(scale) = &column.scale {
                    select.push(scale.clone());
                }
            }
            if select.is_empty() {
                // count of rows only: one constant column keeps the row count.
                select.push("1".into());
            }
            let mut text = format!("SELECT {} FROM {}", aliased(&select), from.text);
            push_where(&mut text, &from.conditions);
            Ok(t.finish(text, Shape::Joined { width: plan.width, positions: read, scaled }))
        }
    }
}

/// A select list whose columns are named `a0, a1, ...` (DataFusion
/// refuses two unnamed columns of the same expression).
pub(super) fn aliased(select: &[String]) -> String {
    select.iter().enumerate().map(|(i, e)| format!("{e} AS a{i}")).collect::<Vec<_>>().join(", ")
}

/// Whether a subquery in FROM gives its rows in no order the row path
/// keeps and has no row limit: no ORDER BY (the row path keeps a
/// subquery's, a view's, order), LIMIT, OFFSET, DISTINCT ON or windows.
fn unordered(plan: &SelectPlan) -> bool {
    plan.limit.is_none()
        && plan.offset.is_none()
        && plan.order_by.is_empty()
        && plan.distinct_on.is_empty()
        && plan.windows.is_empty()
}

/// The plan of a subquery in FROM. A WITH query the row path
/// materializes once (one read more than once) is one too: the translation
/// takes no volatile function, so each read gives the same rows.
fn subquery_plan(source: &VirtualSource) -> Option<&SelectPlan> {
    match source {
        VirtualSource::Query(SetTree::Select(sub)) => Some(sub),
        VirtualSource::Shared { source, .. } => subquery_plan(source),
        _ => None,
    }
}

pub(super) fn push_where(text: &mut String, conditions: &[String]) {
    if !conditions.is_empty() {
        let _ = write!(text, " WHERE {}", conditions.join(" AND "));
    }
}

/// A FROM clause: its text, the WHERE conjuncts, and each joined-row
/// position's column reference.
pub(super) struct From {
    pub(super) text: String,
    pub(super) conditions: Vec<String>,
    pub(super) columns: Vec<Option<Sql>>,
}

impl From {
    fn column(&self, c: usize) -> Res<&Sql> {
        self.columns.get(c).and_then(Option::as_ref).ok_or_else(|| format!("column {c} of the joined row"))
    }
}

/// How a FROM item's columns are named in the analytic query.
enum Columns {
    /// A stored table's copy: its column names (not the FROM item's aliases).
    Stored(Vec<String>),
    /// A subquery's `c0, c1, ...`, of these kinds; with `true`, the
    /// numeric's scale of each row is in `c{i}s` (side.rs).
    Derived(super::side::DerivedColumns),
}

pub(super) struct Translator<'c> {
    pub(super) cx: &'c mut dyn Context,
    tables: Vec<String>,
    largest_scan: u64,
    /// Derived tables entered (aliases stay unique).
    pub(super) depth: usize,
    /// The rows around the correlated subqueries being translated, the
    /// innermost last: `Expr::Outer` reads the last (correlated.rs).
    pub(super) outer: Vec<Vec<Option<Sql>>>,
    /// See [`Translation::sides`].
    pub(super) sides: Vec<SideTable>,
    pub(super) side_queries: Vec<String>,
    /// Per FROM being translated (innermost last), its inner-joined levels
    /// so far with the conditions that read them alone (correlated.rs
    /// restricts a per-key query to the keys such a level can give).
    pub(super) from_levels: Vec<Vec<LevelText>>,
    /// The index in `from_levels` of the FROM whose WHERE conjunct is
    /// being translated now (None in a select list, HAVING or ON, whose
    /// rows are not that FROM's joined row).
    pub(super) in_where: Option<usize>,
    /// Per correlated subquery being translated (as `outer`), the levels
    /// of the FROM whose conjunct holds it, when one does.
    pub(super) outer_levels: Vec<Option<Vec<LevelText>>>,
}

/// A level of a FROM as translated: its columns' positions in the joined
/// row, its relation (`"part" AS t0_1`), and the WHERE conjuncts that read
/// only it (no subquery).
#[derive(Clone)]
pub(super) struct LevelText {
    pub(super) columns: std::ops::Range<usize>,
    pub(super) relation: String,
    pub(super) conditions: Vec<String>,
}

/// Values beyond this many in a subquery's IN list keep the row path.
const IN_LIST_MAX: usize = 10_000;

impl Translator<'_> {
    fn finish(self, sql: String, shape: Shape) -> Translation {
        let mut tables = self.tables;
        tables.sort();
        tables.dedup();
        Translation {
            sql,
            shape,
            tables,
            largest_scan: self.largest_scan,
            sides: self.sides,
            side_queries: self.side_queries,
        }
    }

    /// The next side table's name, numbered by `side_queries` (which
    /// EXPLAIN fills too, while `sides` stays empty there).
    pub(super) fn side_name(&self) -> String {
        format!("pgtier_side_{}", self.side_queries.len())
    }

    pub(super) fn from(&mut self, plan: &SelectPlan) -> Res<From> {
        self.keyed_from(plan, None)
    }

    /// The FROM clause; with `keys`, a correlated subquery's: each WHERE
    /// conjunct `x = <enclosing column c>` (x reading only this query) is
    /// taken out into `keys` as (x, c) instead of translated, and any other
    /// reference to the enclosing row is refused (correlated.rs groups by
    /// the keys).
    pub(super) fn keyed_from(&mut self, plan: &SelectPlan, keys: Option<&mut Vec<(Expr, usize)>>) -> Res<From> {
        if plan.levels.is_empty() {
            return Err("no FROM".into());
        }
        let prefix = format!("t{}_", self.depth);
        self.depth += 1;
        self.from_levels.push(Vec::new());
        let from = self.keyed_from_levels(plan, &prefix, keys);
        self.from_levels.pop();
        from
    }

    fn keyed_from_levels(
        &mut self,
        plan: &SelectPlan,
        prefix: &str,
        mut keys: Option<&mut Vec<(Expr, usize)>>,
    ) -> Res<From> {
        let mut columns: Vec<Option<Sql>> = vec![None; plan.width];
        let mut text = String::new();
        let mut conditions = Vec::new();
        for (l, level) in plan.levels.iter().enumerate() {
            let alias = format!("{prefix}{l}");
            let (relation, source) = self.relation(level, &alias)?;
            for (i, col) in level.table.columns.iter().enumerate() {
                let (name, kind, scaled) = match &source {
                    Columns::Derived(kinds) => {
                        let (kind, scaled) = kinds.get(i).copied().unzip();
                        (format!("c{i}"), kind, scaled == Some(true))
                    }
                    Columns::Stored(names) => {
                        let name = names.get(i).ok_or_else(|| format!("column {i} of \"{}\"", level.table.name))?;
                        (quote_ident(name), Kind::of_type(col.ty), false)
                    }
                };
                if let (Some(kind), Some(slot)) = (kind, columns.get_mut(level.offset + i)) {
                    let mut column = sql(format!("{alias}.{name}"), kind);
                    if scaled {
                        column.scale = Some(format!("{alias}.{name}s"));
                    }
                    *slot = Some(column);
                }
            }
            if level.full_join {
                return Err("FULL JOIN".into());
            }
            let mut own: Vec<Expr> = Vec::new();
            if let Access::PkLookup { key } = &level.access {
                for (&c, e) in level.table.primary_key.iter().zip(key) {
                    own.push(Expr::Cmp(CmpOp::Eq, Box::new(Expr::Column(level.offset + c)), Box::new(e.clone())));
                }
            }
            own.extend(level.filters.iter().chain(&level.key_checks).cloned());
            let cx = Cols(&columns);
            if l > 0 && level.left_join {
                // ON conditions: never a correlation key.
                let mut on = Vec::with_capacity(own.len());
                for e in &own {
                    if keys.is_some() && reads_outer(e) {
                        return Err("a correlation inside a LEFT JOIN's ON".into());
                    }
                    on.push(self.condition(e, &cx)?);
                }
                let on = if on.is_empty() { "TRUE".to_owned() } else { on.join(" AND ") };
                let _ = write!(text, " LEFT JOIN {relation} ON {on}");
            } else {
                if l == 0 {
                    text = relation.clone();
                } else {
                    let _ = write!(text, " CROSS JOIN {relation}");
                }
                // Conjuncts without a subquery first: the level's record is
                // complete before a correlated subquery among the others
                // looks at it.
                let columns = level.offset..level.offset + level.table.columns.len();
                let mut alone = Vec::new();
                let (plain, with_subquery): (Vec<&Expr>, Vec<&Expr>) = own.iter().partition(|e| !e.has_subquery());
                for e in plain {
                    let before = conditions.len();
                    self.where_condition(e, &cx, keys.as_deref_mut(), &mut conditions)?;
                    if conditions.len() > before && reads_only(e, &columns) {
                        alone.extend(conditions.last().cloned());
                    }
                }
                if let Some(levels) = self.from_levels.last_mut() {
                    levels.push(LevelText { columns, relation, conditions: alone });
                }
                for e in with_subquery {
                    self.where_condition(e, &cx, keys.as_deref_mut(), &mut conditions)?;
                }
            }
            for f in &level.post_filters {
                self.where_condition(f, &cx, keys.as_deref_mut(), &mut conditions)?;
            }
        }
        let cx = Cols(&columns);
        for f in &plan.final_filters {
            self.where_condition(f, &cx, keys.as_deref_mut(), &mut conditions)?;
        }
        Ok(From { text, conditions, columns })
    }

    /// A WHERE conjunct of the innermost FROM into `conditions`, or into
    /// `keys` (see [`Translator::keyed_from`]).
    fn where_condition(
        &mut self,
        e: &Expr,
        cx: &Cols<'_>,
        keys: Option<&mut Vec<(Expr, usize)>>,
        conditions: &mut Vec<String>,
    ) -> Res<()> {
        let enclosing = self.in_where.replace(self.from_levels.len().saturating_sub(1));
        let done = self.where_conjunct(e, cx, keys, conditions);
        self.in_where = enclosing;
        done
    }

    fn where_conjunct(
        &mut self,
        e: &Expr,
        cx: &Cols<'_>,
        keys: Option<&mut Vec<(Expr, usize)>>,
        conditions: &mut Vec<String>,
    ) -> Res<()> {
        if let Some(keys) = keys
            && reads_outer(e)
        {
            let key = match e {
                Expr::Cmp(CmpOp::Eq, a, b) => match (a.as_ref(), b.as_ref()) {
                    (x, Expr::Outer(c)) | (Expr::Outer(c), x) if !reads_outer(x) => Some((x.clone(), *c)),
                    _ => None,
                },
                _ => None,
            };
            keys.push(key.ok_or("a correlation other than equality with a column of the enclosing row")?);
            return Ok(());
        }
        conditions.push(self.condition(e, cx)?);
        Ok(())
    }

    /// A level's relation with its alias: a stored table with a columnar
    /// copy, or a subquery in FROM translated whole (with its columns' kinds).
    fn relation(&mut self, level: &Level, alias: &str) -> Res<(String, Columns)> {
        match &level.access {
            Access::Virtual(source) => match subquery_plan(source) {
                Some(sub) => match self.derived(sub) {
                    Ok((text, kinds)) => Ok((
                        format!("({text}) AS {alias}"),
                        Columns::Derived(kinds.into_iter().map(|k| (k, false)).collect()),
                    )),
                    // Computed first (side.rs), when it could be inline but
                    // for a value DataFusion does not compute as pgtier.
                    Err(why) if !unordered(sub) => Err(why),
                    Err(why) => match self.derived_side(sub) {
                        Ok((name, columns)) => Ok((format!("{name} AS {alias}"), Columns::Derived(columns))),
                        Err(first) => Err(format!("{why}; computed first: {first}")),
                    },
                },
                None => Err(format!("FROM item \"{}\" is not a stored table or a subquery", level.table.name)),
            },
            access => {
                let Some((names, rows)) = self.cx.copy_columns(&level.table) else {
                    return Err(format!("relation \"{}\" has no columnar copy", level.table.name));
                };
                if matches!(access, Access::FullScan) {
                    self.largest_scan = self.largest_scan.max(rows);
                }
                self.tables.push(level.table.name.clone());
                Ok((format!("{} AS {alias}", quote_table(&level.table.name)), Columns::Stored(names)))
            }
        }
    }

    /// A subquery in FROM as a whole SELECT whose columns are `c0, c1, ...`,
    /// and their kinds.
    fn derived(&mut self, plan: &SelectPlan) -> Res<(String, Vec<Kind>)> {
        if !unordered(plan) {
            // ORDER BY too: the row path keeps a subquery's (a view's) order.
            return Err("a subquery in FROM with ORDER BY, LIMIT, OFFSET, DISTINCT ON or windows".into());
        }
        let from = self.from(plan)?;
        let visible = &plan.projection[..plan.visible];
        let mut text = String::from("SELECT ");
        if plan.distinct {
            text.push_str("DISTINCT ");
        }
        let (outputs, group_by, having, source) = match &plan.agg {
            Some(agg) => {
                // The projection and HAVING read the aggregate row.
                let a = self.aggregate(agg, &from)?;
                let cx = Cols(&a.row);
                let having = match &agg.having {
                    Some(h) => Some(self.condition(h, &cx)?),
                    None => None,
                };
                let outputs = visible.iter().map(|e| self.expr(e, &cx)).collect::<Res<Vec<_>>>()?;
                (outputs, a.group_by, having, Some(a.from))
            }
            None => {
                let cx = Cols(&from.columns);
                (visible.iter().map(|e| self.expr(e, &cx)).collect::<Res<Vec<_>>>()?, Vec::new(), None, None)
            }
        };
        if outputs.iter().any(|o| o.scale.is_some()) {
            return Err("a subquery in FROM giving numerics of varying scale".into());
        }
        let select: Vec<String> = outputs.iter().enumerate().map(|(i, o)| format!("{} AS c{i}", o.text)).collect();
        match source {
            Some(inner) => {
                let _ = write!(text, "{} FROM {inner}", select.join(", "));
            }
            None => {
                let _ = write!(text, "{} FROM {}", select.join(", "), from.text);
                push_where(&mut text, &from.conditions);
            }
        }
        if !group_by.is_empty() {
            let _ = write!(text, " GROUP BY {}", group_by.join(", "));
        }
        if let Some(h) = having {
            let _ = write!(text, " HAVING {h}");
        }
        Ok((text, outputs.into_iter().map(|o| o.kind).collect()))
    }

    /// A boolean condition.
    pub(super) fn condition(&mut self, e: &Expr, cx: &Cols<'_>) -> Res<String> {
        let c = self.expr(e, cx)?;
        match c.kind {
            Kind::Bool | Kind::Null => Ok(c.text),
            k => Err(format!("a condition of kind {k:?}")),
        }
    }

    pub(super) fn expr(&mut self, e: &Expr, cx: &Cols<'_>) -> Res<Sql> {
        Ok(match e {
            Expr::Column(c) => cx.get(*c)?,
            Expr::Param(i) => {
                let v = self.cx.params().get(*i).cloned().ok_or_else(|| format!("parameter ${}", i + 1))?;
                literal(&v)?
            }
            Expr::Const(v) => literal(v)?,
            Expr::Not(x) => {
                let x = self.expr(x, cx)?;
                bool_kind(&x)?;
                sql(format!("(NOT {})", x.text), Kind::Bool)
            }
            Expr::Neg(x) => {
                let x = self.expr(x, cx)?;
                match x.kind {
                    Kind::Num(_) => Sql { text: format!("(- {})", x.text), kind: x.kind, scale: x.scale },
                    k => return Err(format!("negation of {k:?}")),
                }
            }
            Expr::Arith(op, a, b, ty) => self.arith(*op, a, b, *ty, cx)?,
            Expr::Concat(a, b) => {
                let (a, b) = (self.expr(a, cx)?, self.expr(b, cx)?);
                if a.kind != Kind::Text || b.kind != Kind::Text {
                    return Err("|| of non-text values".into());
                }
                sql(format!("({} || {})", a.text, b.text), Kind::Text)
            }
            Expr::Cmp(op, a, b) => {
                let (a, b) = comparable(self.expr(a, cx)?, self.expr(b, cx)?)?;
                sql(format!("({} {} {})", a, op.symbol(), b), Kind::Bool)
            }
            Expr::And(es) | Expr::Or(es) => {
                let joiner = if matches!(e, Expr::And(_)) { " AND " } else { " OR " };
                let parts = es.iter().map(|x| self.condition(x, cx)).collect::<Res<Vec<_>>>()?;
                if parts.is_empty() {
                    return Err("an empty AND/OR".into());
                }
                sql(format!("({})", parts.join(joiner)), Kind::Bool)
            }
            Expr::IsNull(x, negated) => {
                let x = self.expr(x, cx)?;
                sql(format!("({} IS {}NULL)", x.text, if *negated { "NOT " } else { "" }), Kind::Bool)
            }
            Expr::IsDistinct(a, b, negated) => {
                let (a, b) = comparable(self.expr(a, cx)?, self.expr(b, cx)?)?;
                sql(format!("({a} IS {}DISTINCT FROM {b})", if *negated { "NOT " } else { "" }), Kind::Bool)
            }
            Expr::IsBool(x, target, negated) => {
                let x = self.condition(x, cx)?;
                let not = if *negated { "NOT " } else { "" };
                sql(format!("({x} IS {not}{})", if *target { "TRUE" } else { "FALSE" }), Kind::Bool)
            }
            Expr::Like { expr, pattern, negated, case_insensitive } => {
                let x = self.expr(expr, cx)?;
                let p = match pattern.as_ref() {
                    Expr::Const(Value::Text(p)) if !p.contains('\\') && !*case_insensitive => p,
                    _ => return Err("LIKE with a pattern other than a constant without backslashes".into()),
                };
                if x.kind != Kind::Text {
                    return Err("LIKE over a non-text value".into());
                }
                let not = if *negated { "NOT " } else { "" };
                sql(format!("({} {not}LIKE {})", x.text, quote_text(p)), Kind::Bool)
            }
            Expr::InList { expr, list, negated } => {
                let x = self.expr(expr, cx)?;
                let mut items = Vec::with_capacity(list.len());
                let mut left = x.text.clone();
                for item in list {
                    let (l, r) = comparable(x.clone(), self.expr(item, cx)?)?;
                    left = l;
                    items.push(r);
                }
                in_list(&left, &items, *negated)?
            }
            Expr::Case { operand, whens, otherwise } => {
                self.case(operand.as_deref(), whens, otherwise.as_deref(), cx)?
            }
            Expr::Coalesce(es) => {
                let parts = es.iter().map(|x| self.expr(x, cx)).collect::<Res<Vec<_>>>()?;
                let (kind, varying) = unify(&parts.iter().collect::<Vec<_>>())?;
                let texts: Vec<&str> = parts.iter().map(|p| p.text.as_str()).collect();
                let mut out = sql(format!("coalesce({})", texts.join(", ")), kind);
                if varying {
                    // The scale of the first value that is not NULL.
                    let whens: Vec<String> =
                        parts.iter().map(|p| format!("WHEN {} IS NOT NULL THEN {}", p.text, p.scale_text())).collect();
                    out.scale = Some(format!("(CASE {} END)", whens.join(" ")));
                }
                out
            }
            Expr::NullIf(a, b) => {
                let a = self.expr(a, cx)?;
                let (kind, scale) = (a.kind, a.scale.clone());
                let (x, y) = comparable(a, self.expr(b, cx)?)?;
                Sql { text: format!("nullif({x}, {y})"), kind, scale }
            }
            Expr::Cast(x, ty, _) => cast_expr(self.expr(x, cx)?, *ty)?,
            Expr::BpcharTrim(x) => {
                let x = self.expr(x, cx)?;
                if x.kind != Kind::Text {
                    return Err("char(n) trim of a non-text value".into());
                }
                sql(format!("rtrim({}, ' ')", x.text), Kind::Text)
            }
            Expr::Func(f, args) => self.function(*f, args, cx)?,
            Expr::Subquery(s) => self.subquery(s, cx)?,
            Expr::Outer(c) => match self.outer.last().and_then(|row| row.get(*c)).cloned().flatten() {
                Some(column) => column,
                None => return Err(format!("column {c} of the enclosing row has no columnar form")),
            },
            Expr::AggRef(_) | Expr::WindowRef(_) => return Err("an aggregate or window reference".into()),
        })
    }

    fn arith(&mut self, op: ArithOp, a: &Expr, b: &Expr, ty: DataType, cx: &Cols<'_>) -> Res<Sql> {
        use Kind as K;
        let (a, b) = (self.expr(a, cx)?, self.expr(b, cx)?);
        let wide = |x: &Sql| if x.kind.is_int() { cast(&x.text, K::Num(0)) } else { x.text.clone() };
        match (a.kind, b.kind, Kind::of_type(ty)) {
            // Numerics (an integer operand is one of scale 0): numeric_add
            // and numeric_sub keep the larger scale, numeric_mul the sum of
            // the two, all exact; division and modulo round: refused.
            (K::Num(_) | K::Int2 | K::Int4 | K::Int8, K::Num(_) | K::Int2 | K::Int4 | K::Int8, _)
                if matches!(ty, DataType::Numeric { .. }) && (!a.kind.is_int() || !b.kind.is_int()) =>
            {
                let (x, y) = (scale_of(a.kind), scale_of(b.kind));
                let scale = match op {
                    ArithOp::Add | ArithOp::Sub => x.max(y),
                    ArithOp::Mul => x + y,
                    ArithOp::Div | ArithOp::Mod => return Err("numeric division".into()),
                };
                if scale > 38 {
                    return Err("a numeric scale above 38".into());
                }
                let varying = (a.scale.is_some() || b.scale.is_some()).then(|| match op {
                    ArithOp::Mul => format!("({} + {})", a.scale_text(), b.scale_text()),
                    _ => format!("greatest({}, {})", a.scale_text(), b.scale_text()),
                });
                Ok(Sql {
                    text: format!("({} {} {})", wide(&a), op.symbol(), wide(&b)),
                    kind: K::Num(scale),
                    scale: varying,
                })
            }
            // Integers: computed exactly, then cast to the result type,
            // which fails (and the row path raises 22003) where pgtier's
            // checked arithmetic overflows.
            (x, y, Some(out)) if x.is_int() && y.is_int() && out.is_int() => match op {
                ArithOp::Add | ArithOp::Sub | ArithOp::Mul => {
                    let exact = format!("({} {} {})", wide(&a), op.symbol(), wide(&b));
                    Ok(sql(cast(&exact, out), out))
                }
                // Division and modulo truncate toward zero in both engines,
                // computed in bigint as the row path does. A zero divisor
                // or bigint's MIN / -1 fails the analytic query, and the
                // row path then raises PostgreSQL's error (or gives its 0
                // for MIN % -1).
                ArithOp::Div | ArithOp::Mod => {
                    let exact = format!("({} {} {})", cast(&a.text, K::Int8), op.symbol(), cast(&b.text, K::Int8));
                    Ok(sql(cast(&exact, out), out))
                }
            },
            // date +/- integer days is a date.
            (K::Date, y, Some(K::Date)) if y.is_int() && matches!(op, ArithOp::Add | ArithOp::Sub) => {
                let days = format!("(CAST({} AS INT) {} {})", a.text, op.symbol(), cast(&b.text, K::Int4));
                Ok(sql(format!("arrow_cast({days}, 'Date32')"), K::Date))
            }
            (x, y, _) => Err(format!("arithmetic over {x:?} and {y:?}")),
        }
    }

    fn case(
        &mut self,
        operand: Option<&Expr>,
        whens: &[(Expr, Expr)],
        otherwise: Option<&Expr>,
        cx: &Cols<'_>,
    ) -> Res<Sql> {
        let mut text = String::from("(CASE");
        let subject = match operand {
            Some(o) => Some(self.expr(o, cx)?),
            None => None,
        };
        if let Some(s) = &subject {
            let _ = write!(text, " {}", s.text);
        }
        let mut results = Vec::with_capacity(whens.len() + 1);
        let mut scales = text.clone();
        for (when, then) in whens {
            let w = match &subject {
                Some(s) => {
                    let (_, w) = comparable(s.clone(), self.expr(when, cx)?)?;
                    w
                }
                None => self.condition(when, cx)?,
            };
            let t = self.expr(then, cx)?;
            let _ = write!(text, " WHEN {w} THEN {}", t.text);
            let _ = write!(scales, " WHEN {w} THEN {}", t.scale_text());
            results.push(t);
        }
        if let Some(o) = otherwise {
            let o = self.expr(o, cx)?;
            let _ = write!(text, " ELSE {}", o.text);
            let _ = write!(scales, " ELSE {}", o.scale_text());
            results.push(o);
        }
        text.push_str(" END)");
        scales.push_str(" END)");
        // Branches of different numeric scales give rows of different
        // scales (kept by sums and shown): each row's scale goes along.
        let (kind, varying) = unify(&results.iter().collect::<Vec<_>>())?;
        Ok(Sql { text, kind, scale: varying.then_some(scales) })
    }

    /// The builtins whose value DataFusion computes as pgtier does, for
    /// the arguments checked here.
    fn function(&mut self, f: Func, args: &[Expr], cx: &Cols<'_>) -> Res<Sql> {
        let Func::Builtin(b) = f else { return Err("a system function".into()) };
        match (b.name, b.data, args) {
            // extract(year | month | day FROM date or timestamp): a numeric
            // of scale 0. Year 0 in DataFusion's proleptic calendar is
            // PostgreSQL's 1 BC (-1), and so on down.
            ("extract", CallData::Field(field @ (DateField::Year | DateField::Month | DateField::Day)), [x]) => {
                let x = self.expr(x, cx)?;
                if !matches!(x.kind, Kind::Date | Kind::Timestamp) {
                    return Err(format!("extract from {:?}", x.kind));
                }
                let part = match field {
                    DateField::Year => "year",
                    DateField::Month => "month",
                    _ => "day",
                };
                let mut v = format!("CAST(date_part('{part}', {}) AS BIGINT)", x.text);
                if field == DateField::Year {
                    v = format!("(CASE WHEN {v} <= 0 THEN {v} - 1 ELSE {v} END)");
                }
                Ok(sql(cast(&v, Kind::Num(0)), Kind::Num(0)))
            }
            // substring(text FROM start FOR count) with constants start >= 1
            // and count >= 0, where both count characters alike.
            ("substr", _, [x, start, count]) => {
                let x = self.expr(x, cx)?;
                let positive = |e: &Expr, min: i64| match e {
                    Expr::Const(v) => v.as_i64().filter(|n| *n >= min),
                    _ => None,
                };
                match (x.kind, positive(start, 1), positive(count, 0)) {
                    (Kind::Text, Some(from), Some(n)) => {
                        Ok(sql(format!("substr({}, {from}, {n})", x.text), Kind::Text))
                    }
                    _ => Err("substring other than of text at constant positions".into()),
                }
            }
            // ascii(text): the first character's code point, 0 for ''
            // (DataFusion's keeps a dictionary's encoding: cast back).
            ("ascii", _, [x]) => {
                let x = self.expr(x, cx)?;
                if x.kind != Kind::Text {
                    return Err("ascii of a non-text value".into());
                }
                Ok(sql(cast(&format!("ascii({})", x.text), Kind::Int4), Kind::Int4))
            }
            _ => Err(format!("function {}", b.name)),
        }
    }

    /// An uncorrelated subquery's value, computed by pgtier and inlined.
    fn subquery(&mut self, s: &Subquery, cx: &Cols<'_>) -> Res<Sql> {
        if s.correlated {
            return self.correlated(s, cx);
        }
        let kind = s.plan.columns.first().and_then(|c| c.ty).map_or(Some(Kind::Null), Kind::of_type);
        let lhs = match &s.kind {
            SubqueryKind::In { lhs, trim_rows: false } => Some(self.expr(lhs, cx)?),
            SubqueryKind::In { .. } => return Err("IN over char(n) values".into()),
            SubqueryKind::Exists | SubqueryKind::Scalar { column: 0 } => None,
            _ => return Err("this kind of subquery".into()),
        };
        let Some(values) = self.cx.subquery_values(s) else {
            // EXPLAIN: the value is computed when the statement runs.
            return Ok(sql(
                "(uncorrelated subquery)".into(),
                if lhs.is_some() { Kind::Bool } else { kind.unwrap_or(Kind::Null) },
            ));
        };
        let values = values.map_err(|e| format!("the subquery failed on the row path: {}", e.message))?;
        match (&s.kind, lhs) {
            (SubqueryKind::Exists, _) => Ok(sql(bool_text(values.is_empty() == s.negated).into(), Kind::Bool)),
            (SubqueryKind::Scalar { .. }, _) => match values.as_slice() {
                [] => Ok(sql("NULL".into(), Kind::Null)),
                [v] => literal(v),
                _ => Err("a scalar subquery with more than one row".into()),
            },
            (_, Some(x)) => {
                if values.is_empty() {
                    return Ok(sql(bool_text(s.negated).into(), Kind::Bool));
                }
                if values.len() > IN_LIST_MAX {
                    return Err(format!("an IN subquery of more than {IN_LIST_MAX} values"));
                }
                let mut items = Vec::with_capacity(values.len());
                let mut left = x.text.clone();
                for v in &values {
                    let (l, r) = comparable(x.clone(), literal(v)?)?;
                    left = l;
                    items.push(r);
                }
                in_list(&left, &items, s.negated)
            }
            _ => Err("this kind of subquery".into()),
        }
    }
}

/// Whether `e` reads no column outside `columns` of the joined row, nor the
/// enclosing row (its constants and parameters aside).
fn reads_only(e: &Expr, columns: &std::ops::Range<usize>) -> bool {
    let mut only = true;
    e.walk(&mut |x| match x {
        Expr::Column(c) => only &= columns.contains(c),
        Expr::Outer(_) => only = false,
        _ => {}
    });
    only
}

/// Whether `e` reads the enclosing query's row (not counting subqueries
/// inside it, whose `Expr::Outer` is their own enclosing row).
pub(super) fn reads_outer(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| found |= matches!(x, Expr::Outer(_)));
    found
}

/// A numeric operand's scale (an integer's is 0).
fn scale_of(kind: Kind) -> u8 {
    match kind {
        Kind::Num(s) => s,
        _ => 0,
    }
}

fn bool_kind(x: &Sql) -> Res<()> {
    match x.kind {
        Kind::Bool | Kind::Null => Ok(()),
        k => Err(format!("NOT of {k:?}")),
    }
}

fn bool_text(b: bool) -> &'static str {
    if b { "TRUE" } else { "FALSE" }
}

/// `x [NOT] IN (items)`; items is never empty.
fn in_list(x: &str, items: &[String], negated: bool) -> Res<Sql> {
    if items.is_empty() {
        return Err("an empty IN list".into());
    }
    let not = if negated { "NOT " } else { "" };
    Ok(sql(format!("({x} {not}IN ({}))", items.join(", ")), Kind::Bool))
}

/// The kind all of `parts` share (NULLs take any; numerics of different
/// scales share the largest, their rows' scales then varying).
pub(super) fn unify(parts: &[&Sql]) -> Res<(Kind, bool)> {
    let mut out = Kind::Null;
    let mut varying = false;
    for p in parts {
        varying |= p.scale.is_some();
        match (out, p.kind) {
            (_, Kind::Null) => {}
            (Kind::Null, k) => out = k,
            (Kind::Num(a), Kind::Num(b)) if a != b => {
                out = Kind::Num(a.max(b));
                varying = true;
            }
            (a, b) if a == b => {}
            (a, b) => return Err(format!("branches of kinds {a:?} and {b:?}")),
        }
    }
    Ok((out, varying))
}

/// Two operands of a comparison as texts DataFusion compares as pgtier's
/// `value::compare` does: integers of any width, numerics of any scale
/// (an integer beside a numeric made one), text by bytes, dates, a date
/// beside a timestamp as its midnight, booleans.
pub(super) fn comparable(a: Sql, b: Sql) -> Res<(String, String)> {
    use Kind as K;
    Ok(match (a.kind, b.kind) {
        (x, y) if x == y => (a.text, b.text),
        (K::Null, _) | (_, K::Null) => (a.text, b.text),
        (x, y) if x.is_int() && y.is_int() => (cast(&a.text, K::Int8), cast(&b.text, K::Int8)),
        (K::Num(_), y) if y.is_int() => (a.text, cast(&b.text, K::Num(0))),
        (x, K::Num(_)) if x.is_int() => (cast(&a.text, K::Num(0)), b.text),
        (K::Num(_), K::Num(_)) => (a.text, b.text),
        (K::Date, K::Timestamp) => (timestamp_of(&a.text), b.text),
        (K::Timestamp, K::Date) => (a.text, timestamp_of(&b.text)),
        (x, y) => return Err(format!("a comparison of {x:?} with {y:?}")),
    })
}

/// The SQL cast of `text` to `kind` (a numeric to 38 digits at its scale).
pub(super) fn cast(text: &str, kind: Kind) -> String {
    match kind {
        Kind::Num(s) => format!("CAST({text} AS DECIMAL(38, {s}))"),
        Kind::Timestamp => timestamp_of(text),
        k => format!("CAST({text} AS {})", k.sql_type()),
    }
}

/// A date or timestamp as the copy's timestamp type (microseconds, as the
/// engine keeps them; SQL's TIMESTAMP is nanoseconds in DataFusion, whose
/// range ends in 2262).
fn timestamp_of(text: &str) -> String {
    format!("arrow_cast({text}, 'Timestamp(Microsecond, None)')")
}

/// `x::ty` where the value is the one pgtier's cast gives.
fn cast_expr(x: Sql, ty: DataType) -> Res<Sql> {
    use Kind as K;
    let target = match ty {
        DataType::Numeric { .. } if ty.numeric_own_scale() => None,
        other => Some(Kind::of_type(other).ok_or_else(|| format!("a cast to {}", ty.pg_name()))?),
    };
    Ok(match (x.kind, target) {
        (K::Null, Some(t)) => sql(cast(&x.text, t), t),
        (K::Null, None) => return Err("a NULL cast to numeric".into()),
        // To unconstrained numeric: an integer becomes scale 0, a numeric keeps its scale.
        (k, None) if k.is_int() => sql(cast(&x.text, K::Num(0)), K::Num(0)),
        (K::Num(_), None) => x,
        (k, Some(t)) if k == t && !matches!(ty, DataType::Varchar(_) | DataType::Char(_)) => x,
        (k, Some(t)) if k.is_int() && t.is_int() => sql(cast(&x.text, t), t),
        // To numeric(p, s): exact when s is not below the value's scale;
        // DataFusion refuses a value beyond p digits, as pgtier does.
        (k, Some(K::Num(s))) if k.is_int() || matches!(k, K::Num(from) if from <= s) => {
            let DataType::Numeric { precision, .. } = ty else { return Err("a numeric cast".into()) };
            sql(format!("CAST({} AS DECIMAL({precision}, {s}))", x.text), K::Num(s))
        }
        (K::Date, Some(K::Timestamp)) => sql(timestamp_of(&x.text), K::Timestamp),
        (k, _) => return Err(format!("a cast of {k:?} to {}", ty.pg_name())),
    })
}

/// A constant as a typed literal.
fn literal(v: &Value) -> Res<Sql> {
    Ok(match v {
        Value::Null => sql("NULL".into(), Kind::Null),
        Value::Bool(b) => sql(bool_text(*b).into(), Kind::Bool),
        Value::Int2(i) => sql(format!("CAST({i} AS SMALLINT)"), Kind::Int2),
        Value::Int4(i) => sql(format!("CAST({i} AS INT)"), Kind::Int4),
        Value::Int8(i) => sql(format!("CAST({i} AS BIGINT)"), Kind::Int8),
        Value::Numeric(n) => sql(format!("CAST('{n}' AS DECIMAL(38, {}))", n.scale), Kind::Num(n.scale)),
        Value::Text(s) if !s.contains('\\') => sql(quote_text(s), Kind::Text),
        // Days since 2000-01-01 to Arrow's days since 1970-01-01.
        Value::Date(d) => {
            let days = i64::from(*d) + 10_957;
            sql(format!("arrow_cast(CAST({days} AS INT), 'Date32')"), Kind::Date)
        }
        Value::Timestamp(us) => {
            let micros = i128::from(*us) + 946_684_800_000_000;
            let micros = i64::try_from(micros).map_err(|_| "a timestamp out of range".to_owned())?;
            sql(timestamp_of(&format!("CAST({micros} AS BIGINT)")), Kind::Timestamp)
        }
        other => return Err(format!("a constant of type {}", other.type_name())),
    })
}

fn quote_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// An engine table name (`t`, or `s.t` for schema `s`) as DataFusion's reference.
fn quote_table(name: &str) -> String {
    match name.split_once('.') {
        Some((schema, table)) => format!("{}.{}", quote_ident(schema), quote_ident(table)),
        None => quote_ident(name),
    }
}

/// Joined-row positions (or aggregate-row positions) as translated columns.
pub(super) struct Cols<'a>(pub(super) &'a [Option<Sql>]);

impl Cols<'_> {
    fn get(&self, c: usize) -> Res<Sql> {
        self.0.get(c).and_then(Option::clone).ok_or_else(|| format!("column {c} has no columnar form"))
    }
}
