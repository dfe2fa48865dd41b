//! EXPLAIN: pgtier's own plan as indented text, one row per line.
//!
//! The tree is what the executor runs, in PostgreSQL's shape and node
//! names where the two mean the same thing (Seq Scan, Index Scan, Hash
//! Join, Nested Loop, HashAggregate, Sort, Limit), and pgtier's own where
//! they do not (Primary Key Lookup, System Relation). There are no cost or
//! row estimates: pgtier's planner chooses by rules, not costs, and
//! printing invented numbers would not be honest. Conditions are counted,
//! not printed.

use pgtier_engine::Catalog;

use crate::expr::Expr;
use crate::plan::{
    Access, FrameBound, FrameExclude, FrameUnits, InsertSource, Level, Plan, SelectPlan, SetOp, SetTree, TableFunc,
    VirtualSource, WindowFrame,
};

/// The lines of `plan`'s EXPLAIN; None for a statement EXPLAIN does not take.
pub fn explain(plan: &Plan, catalog: &Catalog) -> Option<Vec<String>> {
    let mut out = Lines { lines: Vec::new(), catalog };
    match plan {
        Plan::Select(s) => out.select(s, 0),
        Plan::Insert(i) => {
            out.node(0, format!("Insert on {}", i.table.name));
            if let Some(oc) = &i.on_conflict {
                out.detail(0, format!("Conflict Arbiter Indexes: {}", oc.arbiters.len()));
            }
            match &i.source {
                InsertSource::Values(rows) => out.node(1, format!("Values Scan ({} rows)", rows.len())),
                InsertSource::Query(q) => out.select(q, 1),
            }
        }
        Plan::Update(u) => {
            out.node(0, format!("Update on {}", u.level.table.name));
            match &u.from {
                Some(j) => out.select(&j.join, 1),
                None => out.level(&u.level, 1),
            }
        }
        Plan::Delete(d) => {
            out.node(0, format!("Delete on {}", d.level.table.name));
            match &d.from {
                Some(j) => out.select(&j.join, 1),
                None => out.level(&d.level, 1),
            }
        }
        Plan::Merge(m) => {
            out.node(0, format!("Merge on {}", m.table.name));
            out.detail(
                0,
                format!("WHEN MATCHED clauses: {}, WHEN NOT MATCHED clauses: {}", m.matched.len(), m.not_matched.len()),
            );
            out.select(&m.join, 1);
        }
        _ => return None,
    }
    Some(out.lines)
}

struct Lines<'c> {
    lines: Vec<String>,
    catalog: &'c Catalog,
}

impl Lines<'_> {
    /// A node at `depth`: the root flush left, children under `->`, as psql shows them.
    fn node(&mut self, depth: usize, text: String) {
        if depth == 0 {
            self.lines.push(text);
        } else {
            self.lines.push(format!("{}->  {text}", " ".repeat(depth * 6 - 4)));
        }
    }

    /// A property line of the node at `depth`.
    fn detail(&mut self, depth: usize, text: String) {
        let indent = if depth == 0 { 2 } else { depth * 6 + 2 };
        self.lines.push(format!("{}{text}", " ".repeat(indent)));
    }

    fn select(&mut self, s: &SelectPlan, mut depth: usize) {
        if s.limit.is_some() || s.offset.is_some() {
            self.node(depth, "Limit".into());
            depth += 1;
        }
        if s.distinct || !s.distinct_on.is_empty() {
            self.node(depth, "Unique".into());
            depth += 1;
        }
        if !s.order_by.is_empty() && !s.index_ordered {
            self.node(depth, "Sort".into());
            self.detail(depth, format!("Sort Keys: {}", s.order_by.len()));
            depth += 1;
        }
        if !s.windows.is_empty() {
            self.node(depth, "WindowAgg".into());
            self.detail(depth, format!("Window Functions: {}", s.windows.len()));
            let mut frames: Vec<String> = Vec::new();
            for frame in s.windows.iter().map(|w| &w.frame).filter(|f| **f != WindowFrame::default_frame()) {
                let text = frame_text(frame);
                if !frames.contains(&text) {
                    frames.push(text);
                }
            }
            for f in frames {
                self.detail(depth, format!("Frame: {f}"));
            }
            depth += 1;
        }
        if let Some(agg) = &s.agg {
            self.node(depth, if agg.group_by.is_empty() { "Aggregate".into() } else { "HashAggregate".into() });
            if !agg.group_by.is_empty() {
                self.detail(depth, format!("Group Keys: {}", agg.group_by.len()));
            }
            self.detail(depth, format!("Aggregates: {}", agg.aggs.len()));
            if agg.having.is_some() {
                self.detail(depth, "Filter: HAVING".into());
            }
            depth += 1;
        }
        if !s.final_filters.is_empty() {
            self.node(depth, "Filter".into());
            self.detail(depth, format!("Conditions on the joined row: {}", s.final_filters.len()));
            depth += 1;
        }
        if s.for_update {
            self.node(depth, "LockRows".into());
            depth += 1;
        }
        self.join(&s.levels, depth);
    }

    /// Levels joined left to right: the last one is the inner side of the
    /// join over all before it.
    fn join(&mut self, levels: &[Level], depth: usize) {
        match levels {
            [] => self.node(depth, "Result".into()),
            [only] => self.level(only, depth),
            [outer @ .., inner] => {
                let kind = if inner.hash_keys.is_empty() { "Nested Loop" } else { "Hash Join" };
                self.node(
                    depth,
                    if inner.full_join {
                        format!("{kind} Full Join")
                    } else if inner.left_join {
                        format!("{kind} Left Join")
                    } else {
                        kind.to_owned()
                    },
                );
                if !inner.hash_keys.is_empty() {
                    self.detail(depth, format!("Hash Keys: {}", inner.hash_keys.len()));
                }
                if inner.full_join {
                    // exec/hash_join.rs full_side: no spill for it.
                    self.detail(depth, "Right side read whole once, within pgtier.statement_mem".to_owned());
                } else if !inner.hash_keys.is_empty() {
                    // Decided while running (exec/hash_join.rs, spill.rs).
                    self.detail(depth, "Past pgtier.statement_mem: sorted by key in a temporary file".to_owned());
                }
                self.join(outer, depth + 1);
                self.level(inner, depth + 1);
            }
        }
    }

    fn level(&mut self, level: &Level, depth: usize) {
        let table = &level.table.name;
        let text = match &level.access {
            Access::PkLookup { .. } => format!("Primary Key Lookup on {table}"),
            Access::IndexScan { index, eq, lower, upper, .. } => {
                let name = self.catalog.index(*index).map_or_else(|| format!("index {index:?}"), |i| i.name.clone());
                let range = match (lower.is_some(), upper.is_some()) {
                    (false, false) => String::new(),
                    _ => " and a range".to_owned(),
                };
                format!("Index Scan using {name} on {table} (equality on {} columns{range})", eq.len())
            }
            Access::FullScan => format!("Seq Scan on {table}"),
            Access::Virtual(source) => return self.virtual_source(source, table, level, depth),
        };
        self.node(depth, text);
        self.filters(level, depth);
    }

    fn filters(&mut self, level: &Level, depth: usize) {
        let n = level.filters.len() + level.post_filters.len();
        if n > 0 {
            self.detail(depth, format!("Filter: {n} conditions"));
        }
    }

    fn virtual_source(&mut self, source: &VirtualSource, name: &str, level: &Level, depth: usize) {
        match source {
            VirtualSource::System(rel) => {
                self.node(depth, format!("System Relation {}", rel.def().name));
                self.filters(level, depth);
            }
            VirtualSource::Function { func, .. } => {
                let f = match func {
                    TableFunc::GenerateSeries => "generate_series",
                    TableFunc::Unnest(_) | TableFunc::UnnestArrays(_) => "unnest",
                    TableFunc::PartitionAncestors => "pg_partition_ancestors",
                    TableFunc::ExpandArray(_) => "_pg_expandarray",
                    TableFunc::Json(_) | TableFunc::JsonToRecord(..) | TableFunc::Scalar => name,
                };
                self.node(depth, format!("Function Scan on {f}"));
                self.filters(level, depth);
            }
            VirtualSource::Query(tree) | VirtualSource::Correlated(tree) | VirtualSource::Lateral(tree) => {
                self.node(depth, format!("Subquery Scan on {name}"));
                self.filters(level, depth);
                self.set_tree(tree, depth + 1);
            }
            VirtualSource::Recursive { anchor, step, all, .. } => {
                self.node(depth, format!("CTE Scan on {name}"));
                self.filters(level, depth);
                self.node(depth + 1, if *all { "Recursive Union All".into() } else { "Recursive Union".into() });
                self.set_tree(anchor, depth + 2);
                self.set_tree(step, depth + 2);
            }
            VirtualSource::Returning(_) => {
                self.node(depth, format!("CTE Scan on {name}"));
                self.filters(level, depth);
            }
            VirtualSource::WorkTable(_) => {
                self.node(depth, format!("WorkTable Scan on {name}"));
                self.filters(level, depth);
            }
            VirtualSource::Shared { source, .. } => match source.as_ref() {
                VirtualSource::Query(tree) | VirtualSource::Correlated(tree) => {
                    self.node(depth, format!("CTE Scan on {name}"));
                    self.filters(level, depth);
                    self.set_tree(tree, depth + 1);
                }
                other => self.virtual_source(other, name, level, depth),
            },
        }
    }

    fn set_tree(&mut self, tree: &SetTree, depth: usize) {
        match tree {
            SetTree::Select(plan) => self.select(plan, depth),
            SetTree::Values(rows) => self.node(depth, format!("Values Scan ({} rows)", rows.len())),
            SetTree::Op { op, all, left, right } => {
                let name = match op {
                    SetOp::Union => "Union",
                    SetOp::Intersect => "Intersect",
                    SetOp::Except => "Except",
                };
                self.node(depth, if *all { format!("{name} All") } else { name.to_owned() });
                self.set_tree(left, depth + 1);
                self.set_tree(right, depth + 1);
            }
        }
    }
}

/// A window frame as ruleutils.c writes one (`ROWS BETWEEN 1 PRECEDING AND
/// CURRENT ROW EXCLUDE TIES`); an offset that is not a constant is
/// `(expression)`.
fn frame_text(f: &WindowFrame) -> String {
    let units = match f.units {
        FrameUnits::Rows => "ROWS",
        FrameUnits::Range => "RANGE",
        FrameUnits::Groups => "GROUPS",
    };
    // A constant coerced to the offset's type prints as the constant.
    fn constant(e: &Expr) -> Option<&pgtier_engine::Value> {
        match e {
            Expr::Const(v) => Some(v),
            Expr::Cast(inner, ..) => constant(inner),
            _ => None,
        }
    }
    let offset = |e: &Expr| match constant(e) {
        Some(v) if v.as_i64().is_some() => crate::value::to_text(v),
        Some(v) => format!("'{}'::{}", crate::value::to_text(v).replace('\'', "''"), v.type_name()),
        None => "(expression)".to_owned(),
    };
    let bound = |b: &FrameBound| match b {
        FrameBound::UnboundedPreceding => "UNBOUNDED PRECEDING".to_owned(),
        FrameBound::Preceding(e) => format!("{} PRECEDING", offset(e)),
        FrameBound::CurrentRow => "CURRENT ROW".to_owned(),
        FrameBound::Following(e) => format!("{} FOLLOWING", offset(e)),
        FrameBound::UnboundedFollowing => "UNBOUNDED FOLLOWING".to_owned(),
    };
    let exclude = match f.exclude {
        FrameExclude::NoOthers => "",
        FrameExclude::CurrentRow => " EXCLUDE CURRENT ROW",
        FrameExclude::Group => " EXCLUDE GROUP",
        FrameExclude::Ties => " EXCLUDE TIES",
    };
    format!("{units} BETWEEN {} AND {}{exclude}", bound(&f.start), bound(&f.end))
}
