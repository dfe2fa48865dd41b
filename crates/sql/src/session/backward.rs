//! Whether PostgreSQL's plan for a cursor declared without SCROLL (nor NO
//! SCROLL) can run backward: PerformCursorOpen makes such a cursor
//! scrollable exactly when ExecSupportsBackwardScan holds for its plan
//! (scans, Sort, Limit, a VALUES list of several rows, a function scan:
//! yes; Result without input, Agg, Unique, SetOp: no). pgtier has no such
//! plan, and answers only for query shapes whose plan's top is one of
//! these whatever PostgreSQL's planner picks; for the rest backward motion
//! is refused (0A000).
//!
//! A backward scan evaluates the select list again, so a shape that may
//! call a function (volatile ones would give other values than the rows
//! pgtier kept) is never `Sure`; nor is one whose rows pgtier may keep in
//! another order than PostgreSQL reads them.

use sqlparser::ast::{
    Distinct, Expr, FunctionArg, FunctionArgExpr, GroupByExpr, LimitClause, OrderByExpr, OrderByKind, Query, Select,
    SelectItem, SetExpr, SetOperator, SetQuantifier, TableFactor,
};

use pgtier_engine::{Catalog, DataType, TableSchema};

/// What PostgreSQL decides for such a cursor.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Backward {
    /// The plan surely supports backward scan: the cursor is SCROLL.
    Sure,
    /// It surely does not: backward motion is 55000.
    Never,
    /// It depends on the plan PostgreSQL picks.
    Unsure,
}

/// The statement a cursor is declared for: its query, the stored tables
/// its plan reads, and its result columns' types.
pub(super) struct Declared<'a> {
    pub(super) query: &'a Query,
    pub(super) deps: &'a [std::sync::Arc<TableSchema>],
    pub(super) types: &'a [Option<DataType>],
}

/// The declared statement's case.
pub(super) fn backward(d: &Declared, catalog: &Catalog) -> Backward {
    let query = d.query;
    if query.with.is_some() || !query.locks.is_empty() {
        return Backward::Unsure;
    }
    let ordered = query.order_by.is_some();
    if let Some(o) = &query.order_by {
        let OrderByKind::Expressions(keys) = &o.kind else { return Backward::Unsure };
        if !keys.iter().all(|k| simple(&k.expr)) {
            return Backward::Unsure;
        }
    }
    if !limits_simple(query) {
        return Backward::Unsure;
    }
    match query.body.as_ref() {
        // A one-row VALUES is planned as a Result without input. Sorted,
        // its rows' order among equal keys is the sort's own.
        SetExpr::Values(v) if v.rows.iter().all(|r| r.content.iter().all(simple)) && !ordered => {
            if v.rows.len() == 1 {
                Backward::Never
            } else {
                Backward::Sure
            }
        }
        SetExpr::Select(s) => select(s, d, catalog),
        // UNION, INTERSECT and EXCEPT (not ALL) end in Unique, HashAggregate
        // or SetOp unless a Sort for ORDER BY is put above them.
        SetExpr::SetOperation { op, set_quantifier, .. }
            if !ordered
                && matches!(set_quantifier, SetQuantifier::None | SetQuantifier::Distinct)
                && matches!(op, SetOperator::Union | SetOperator::Intersect | SetOperator::Except) =>
        {
            Backward::Never
        }
        _ => Backward::Unsure,
    }
}

fn select(s: &Select, d: &Declared, catalog: &Catalog) -> Backward {
    let query = d.query;
    let ordered = query.order_by.is_some();
    let grouped = match &s.group_by {
        GroupByExpr::Expressions(keys, modifiers) => !keys.is_empty() || !modifiers.is_empty(),
        GroupByExpr::All(_) => return Backward::Unsure,
    };
    // Agg, Group or Unique is the plan's top when no Sort is put above it.
    let distinct = matches!(s.distinct, Some(Distinct::Distinct | Distinct::On(_)));
    if (grouped || distinct) && !ordered && !s.from.is_empty() {
        return Backward::Never;
    }
    if grouped || distinct || s.having.is_some() || !s.named_window.is_empty() {
        return Backward::Unsure;
    }
    let items_simple = s.projection.iter().all(|i| match i {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => simple(e),
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => true,
        _ => false,
    });
    if !items_simple || !s.selection.as_ref().is_none_or(simple) {
        return Backward::Unsure;
    }
    let [from] = s.from.as_slice() else {
        // No FROM: a Result without input (under a Limit, maybe).
        return if s.from.is_empty() && !ordered { Backward::Never } else { Backward::Unsure };
    };
    let TableFactor::Table { name, args, sample: None, with_ordinality: false, .. } = &from.relation else {
        return Backward::Unsure;
    };
    if !from.joins.is_empty() {
        return Backward::Unsure;
    }
    match args {
        // A function scan of a built-in set-returning function.
        Some(a) => {
            let builtin = matches!(name.0.as_slice(), [n] if n.as_ident().is_some_and(|i| i.quote_style.is_none()
                && matches!(i.value.to_lowercase().as_str(), "generate_series" | "unnest")));
            let args_simple =
                a.args.iter().all(|arg| matches!(arg, FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if simple(e)));
            if builtin && args_simple && d.deps.is_empty() && !ordered { Backward::Sure } else { Backward::Unsure }
        }
        None => table_scan(s, d, catalog),
    }
}

/// One stored table: a sequential scan, or an index scan (pgtier's
/// indexes are btrees, which scan backward), under a Sort and a Limit.
/// A WHERE on a table with an index may be a bitmap heap scan, and an
/// ORDER BY of several keys an incremental sort over an index: neither
/// runs backward. pgtier's table scans read rows in PostgreSQL's heap
/// order only for a table without a primary key nobody updated, so
/// otherwise only an ORDER BY that fixes every row's place (or leaves in
/// ties only rows that read the same) makes the rows fetched PostgreSQL's.
fn table_scan(s: &Select, d: &Declared, catalog: &Catalog) -> Backward {
    let [t] = d.deps else { return Backward::Unsure };
    // Views, partitioned tables and cache groups' tables (whose indexes
    // are PostgreSQL's) carry an annotation.
    if t.annotation.is_some() || t.sequence.is_some() {
        return Backward::Unsure;
    }
    let indexed = catalog.indexes_of(t.id).iter().any(|i| !i.columns.iter().any(|&c| t.columns[c].is_hidden()));
    let Some(OrderByKind::Expressions(keys)) = d.query.order_by.as_ref().map(|o| &o.kind) else {
        // Unsorted, a table without an index is a Seq Scan in PostgreSQL,
        // and one without a primary key is read in insertion order here
        // (the engine's scan_table), its heap order while nobody updates
        // it: the same rows as any query over it without ORDER BY.
        let heap_ordered = d.query.order_by.is_none() && t.has_rowid() && !indexed;
        return if heap_ordered { Backward::Sure } else { Backward::Unsure };
    };
    if indexed && keys.len() > 1 {
        return Backward::Unsure;
    }
    if !order_fixes_rows(s, keys, t, d.types) {
        return Backward::Unsure;
    }
    Backward::Sure
}

/// Every result column is an ORDER BY key (by name, expression or
/// position) of a type whose equal values read the same: rows the sort
/// leaves tied are identical.
fn order_fixes_rows(s: &Select, keys: &[OrderByExpr], t: &TableSchema, types: &[Option<DataType>]) -> bool {
    let mut outputs: Vec<Vec<String>> = Vec::new();
    for item in &s.projection {
        match item {
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                outputs.extend(t.visible_columns().iter().map(|c| vec![c.name.clone()]));
            }
            SelectItem::UnnamedExpr(e) => outputs.push(vec![e.to_string().to_lowercase()]),
            SelectItem::ExprWithAlias { expr, alias } => {
                outputs.push(vec![expr.to_string().to_lowercase(), alias.value.to_lowercase()]);
            }
            _ => return false,
        }
    }
    let same_text = |ty: &Option<DataType>| {
        matches!(
            ty,
            Some(
                DataType::Bool
                    | DataType::Int2
                    | DataType::Int4
                    | DataType::Int8
                    | DataType::Text
                    | DataType::Varchar(_)
                    | DataType::Date
                    | DataType::Timestamp(_)
                    | DataType::TimestampTz(_)
                    | DataType::Uuid
            )
        )
    };
    let keys: Vec<String> = keys.iter().map(|k| k.expr.to_string().to_lowercase()).collect();
    outputs.len() == types.len()
        && types.iter().all(same_text)
        && outputs
            .iter()
            .enumerate()
            .all(|(i, names)| keys.iter().any(|k| *k == (i + 1).to_string() || names.contains(k)))
}

fn limits_simple(query: &Query) -> bool {
    let limit_ok = match &query.limit_clause {
        None => true,
        Some(LimitClause::LimitOffset { limit, offset, limit_by }) => {
            limit.as_ref().is_none_or(simple) && offset.as_ref().is_none_or(|o| simple(&o.value)) && limit_by.is_empty()
        }
        Some(LimitClause::OffsetCommaLimit { .. }) => false,
    };
    limit_ok && query.fetch.as_ref().is_none_or(|f| !f.percent && f.quantity.as_ref().is_none_or(simple))
}

/// An expression that calls no function and reads no subquery: columns,
/// constants, casts and the built-in operators' forms.
fn simple(e: &Expr) -> bool {
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Value(_) | Expr::TypedString(_) => true,
        Expr::Nested(x)
        | Expr::UnaryOp { expr: x, .. }
        | Expr::Cast { expr: x, .. }
        | Expr::IsNull(x)
        | Expr::IsNotNull(x)
        | Expr::IsTrue(x)
        | Expr::IsNotTrue(x)
        | Expr::IsFalse(x)
        | Expr::IsNotFalse(x)
        | Expr::IsUnknown(x)
        | Expr::IsNotUnknown(x) => simple(x),
        Expr::BinaryOp { left, right, .. }
        | Expr::IsDistinctFrom(left, right)
        | Expr::IsNotDistinctFrom(left, right) => simple(left) && simple(right),
        Expr::Between { expr, low, high, .. } => simple(expr) && simple(low) && simple(high),
        Expr::InList { expr, list, .. } => simple(expr) && list.iter().all(simple),
        Expr::Like { expr, pattern, escape_char: None, any: false, .. }
        | Expr::ILike { expr, pattern, escape_char: None, any: false, .. } => simple(expr) && simple(pattern),
        Expr::Case { operand, conditions, else_result, .. } => {
            operand.as_deref().is_none_or(simple)
                && conditions.iter().all(|c| simple(&c.condition) && simple(&c.result))
                && else_result.as_deref().is_none_or(simple)
        }
        _ => false,
    }
}
