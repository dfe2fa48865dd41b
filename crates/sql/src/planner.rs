//! Access-path choice: which predicates each FROM relation can use to find
//! its rows through the primary key or an ordered index.
//!
//! Relations are joined in the order written (left-deep nested loops),
//! except that a FROM list of inner joins over tables may be reordered by
//! estimated size first ([`join_order`], called by the SELECT binder), and
//! `a RIGHT JOIN b` reads b first and then a as a LEFT JOIN
//! ([`execution_order`]); each level keeps its place in the joined row. A
//! predicate is attached to the first level where every column it reads is
//! bound, and an equality `col = expr` whose `expr` reads only earlier levels
//! becomes a key for that level, which makes the join an index nested loop.
//! Without an index for it, such equalities become the level's hash keys:
//! a level scanned again and again (the inner side of a join, a correlated
//! subquery) is then read once into a hash table (a hash join).

mod join_order;

pub use join_order::join_order;

use pgtier_engine::{Catalog, IndexId};
use pgtier_engine::{DataType, Value};

use crate::error::Result;
use crate::expr::{CmpOp, Expr};

use crate::plan::Rel;
use crate::plan::{Access, Level};

/// A relation's join kind and its ON predicates (bound over the joined row).
pub struct JoinRel {
    pub left: bool,
    /// RIGHT JOIN to the relation before it, which starts its FROM item
    /// (the binder refuses a RIGHT JOIN after another join).
    pub right: bool,
    /// FULL JOIN to the relation before it, which starts its FROM item;
    /// `left` is set too (this side is NULL-extended as a LEFT JOIN's).
    pub full: bool,
    pub on: Vec<Expr>,
}

/// The level holding joined-row position `pos`: levels need not be in
/// row order ([`execution_order`]).
fn level_of(rels: &[Rel], pos: usize) -> usize {
    rels.iter().position(|r| pos >= r.offset && pos < r.offset + r.table.columns.len()).unwrap_or(0)
}

/// The relations in the order the levels read them: `a RIGHT JOIN b ON c`
/// is `b LEFT JOIN a ON c`, so b's level comes first and a's is the
/// NULL-extended one.
fn execution_order(rels: &[Rel], joins: Vec<JoinRel>) -> (Vec<Rel>, Vec<JoinRel>) {
    let mut rels = rels.to_vec();
    let mut joins = joins;
    for l in 1..joins.len().min(rels.len()) {
        if !joins[l].right {
            continue;
        }
        debug_assert!(!joins[l - 1].left && joins[l - 1].on.is_empty(), "RIGHT JOIN after a join");
        rels.swap(l - 1, l);
        let on = std::mem::take(&mut joins[l].on);
        joins[l - 1] = JoinRel { left: false, right: false, full: false, on: Vec::new() };
        joins[l] = JoinRel { left: true, right: false, full: false, on };
    }
    (rels, joins)
}

/// Highest level whose columns `e` reads (None: reads no column).
fn max_level(rels: &[Rel], e: &Expr) -> Option<usize> {
    let mut out: Option<usize> = None;
    e.walk(&mut |x| {
        if let Expr::Column(c) = x {
            let l = level_of(rels, *c);
            out = Some(out.map_or(l, |m| m.max(l)));
        }
    });
    out
}

/// Plans the levels; returns them and the predicates left for the complete row.
pub fn plan_levels(
    catalog: &Catalog,
    rels: &[Rel],
    joins: Vec<JoinRel>,
    conjuncts: Vec<Expr>,
    used: &mut Vec<IndexId>,
) -> Result<(Vec<Level>, Vec<Expr>)> {
    let (rels, mut joins) = execution_order(rels, joins);
    let rels = rels.as_slice();
    for j in &mut joins {
        j.on = std::mem::take(&mut j.on).into_iter().flat_map(conjuncts_of).collect();
    }
    let conjuncts: Vec<Expr> = conjuncts.into_iter().flat_map(conjuncts_of).collect();
    let n = rels.len();
    let mut filters: Vec<Vec<Expr>> = (0..n).map(|_| Vec::new()).collect();
    let mut post: Vec<Vec<Expr>> = (0..n).map(|_| Vec::new()).collect();
    let mut finals = Vec::new();
    let left: Vec<bool> = joins.iter().map(|j| j.left).collect();
    let full: Vec<bool> = joins.iter().map(|j| j.full).collect();
    // A FULL JOIN's left side is NULL-extended too (for the right side's
    // unmatched rows): what reads it is evaluated after the join, on the
    // right side's level.
    let nullable = |l: usize| left.get(l).copied().unwrap_or(false) || full.get(l + 1).copied().unwrap_or(false);
    let after = |l: usize| if full.get(l + 1).copied().unwrap_or(false) { l + 1 } else { l };
    for (l, j) in joins.into_iter().enumerate().take(n) {
        for e in j.on {
            if e.has_subquery() {
                filters[l].push(e);
            } else {
                let at = if j.left { l } else { max_level(rels, &e).unwrap_or(0).min(l) };
                // An inner join's ON can move to the level where it is bound.
                filters[if nullable(at) && at != l { l } else { at }].push(e);
            }
        }
    }
    for e in conjuncts {
        if n == 0 || e.has_subquery() {
            finals.push(e);
            continue;
        }
        let l = max_level(rels, &e).unwrap_or(0);
        if nullable(l) {
            post[after(l)].push(e);
        } else {
            filters[l].push(e);
        }
    }
    let mut levels = Vec::with_capacity(n);
    for (l, rel) in rels.iter().enumerate() {
        let mut level_filters = std::mem::take(&mut filters[l]);
        let full_join = full.get(l).copied().unwrap_or(false);
        // A FULL JOIN's right side is read whole once (its unmatched rows
        // are emitted after the left side's loop): no key narrows it.
        let (access, exact, key_checks) = match &rel.source {
            None if full_join => (Access::FullScan, false, Vec::new()),
            _ => choose_access(catalog, rels, l, rel, &mut level_filters, used),
        };
        // A subquery in FROM that reads no outer row is read once per
        // execution (exec/hash_join.rs `fixed_rows`): it can be hashed too.
        let hashable = match &access {
            Access::FullScan => true,
            Access::Virtual(source) => {
                matches!(
                    **source,
                    crate::plan::VirtualSource::Query(_)
                        | crate::plan::VirtualSource::Shared { .. }
                        | crate::plan::VirtualSource::Returning(_)
                )
            }
            _ => false,
        };
        let hash_keys = if hashable { hash_keys(rels, l, rel, &level_filters) } else { Vec::new() };
        levels.push(Level {
            table: rel.table.clone(),
            offset: rel.offset,
            access,
            exact_key: exact,
            left_join: left.get(l).copied().unwrap_or(false),
            full_join,
            filters: level_filters,
            key_checks,
            post_filters: std::mem::take(&mut post[l]),
            hash_keys,
        });
    }
    Ok((levels, finals))
}

/// The AND-ed parts of a WHERE or ON condition, each placed on its own:
/// `ON a.x = b.y AND b.z > 0` gives the join its key. An OR among them has
/// the parts common to all its arms factored out ([`factor_or`]).
fn conjuncts_of(e: Expr) -> Vec<Expr> {
    let mut parts = Vec::new();
    flatten_and(e, &mut parts);
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        match p {
            Expr::Or(arms) => out.extend(factor_or(arms)),
            other => out.push(other),
        }
    }
    out
}

/// `e`'s AND-ed parts, nested ANDs opened.
pub fn flatten_and(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::And(parts) => parts.into_iter().for_each(|p| flatten_and(p, out)),
        other => out.push(other),
    }
}

/// `(A AND B) OR (A AND C)` as `A AND (B OR C)`, for every conjunct `A`
/// equal (as bound) in every arm, as PostgreSQL's prepqual.c
/// (process_duplicate_ors) does; TPC-H Q19's `p_partkey = l_partkey` in
/// each arm then becomes a hash key instead of a nested loop's filter.
/// Equivalent in SQL's three-valued logic: AND and OR over {false, NULL,
/// true} (false < NULL < true, AND the minimum, OR the maximum) form a
/// distributive lattice, so AND distributes over OR and absorption
/// (`A OR (A AND C)` = `A`) holds with NULLs too. An arm that is nothing
/// but common parts makes the whole OR the common parts (absorption).
/// Only the evaluation order changes, which SQL leaves open (PostgreSQL
/// rewrites the same way); a part that calls a volatile function or holds
/// a subquery is never moved, so nothing runs more or fewer times per row
/// than written. Returns the parts to AND.
fn factor_or(arms: Vec<Expr>) -> Vec<Expr> {
    let movable = |e: &Expr| {
        let mut ok = !e.has_subquery();
        e.walk(&mut |x| {
            ok &= !matches!(x, Expr::Func(f, _) if f.volatility() == crate::expr::Volatility::Volatile);
        });
        ok
    };
    let mut split: Vec<Vec<Expr>> = Vec::with_capacity(arms.len());
    for arm in &arms {
        let mut parts = Vec::new();
        flatten_and(arm.clone(), &mut parts);
        split.push(parts);
    }
    let Some((first, rest)) = split.split_first() else { return vec![Expr::Or(arms)] };
    let mut common: Vec<Expr> = Vec::new();
    for part in first {
        if movable(part) && !common.contains(part) && rest.iter().all(|arm| arm.contains(part)) {
            common.push(part.clone());
        }
    }
    // Every arm must be free of volatile calls too: factoring changes how
    // often the other parts of an arm run.
    if common.is_empty() || !arms.iter().all(movable) {
        return vec![Expr::Or(arms)];
    }
    let mut residual: Vec<Expr> = Vec::with_capacity(split.len());
    for arm in split {
        let mut left: Vec<Expr> = arm.into_iter().filter(|p| !common.contains(p)).collect();
        match left.len() {
            0 => return common,
            1 => residual.extend(left.pop()),
            _ => residual.push(Expr::And(left)),
        }
    }
    common.push(Expr::Or(residual));
    common
}

/// A usable key predicate: (filter index, column in the table, operator, other side).
struct KeyPred {
    filter: usize,
    column: usize,
    op: CmpOp,
    expr: Expr,
}

fn key_preds(rels: &[Rel], l: usize, rel: &Rel, filters: &[Expr]) -> Vec<KeyPred> {
    let width = rel.table.columns.len();
    let mut out = Vec::new();
    for (i, f) in filters.iter().enumerate() {
        let Expr::Cmp(op, a, b) = f else { continue };
        if *op == CmpOp::NotEq {
            continue;
        }
        let sides = [(a.as_ref(), b.as_ref(), *op), (b.as_ref(), a.as_ref(), op.flip())];
        for (col_side, other, op) in sides {
            let Expr::Column(c) = col_side else { continue };
            if *c < rel.offset || *c >= rel.offset + width {
                continue;
            }
            if other.has_subquery() || max_level(rels, other).is_some_and(|m| m >= l) {
                continue;
            }
            out.push(KeyPred { filter: i, column: c - rel.offset, op, expr: other.clone() });
            break;
        }
    }
    out
}

/// The equalities a FullScan level can probe a hash table with. The
/// probe side is evaluated once per probe instead of once per candidate,
/// so only expressions that cannot fail or change between evaluations
/// qualify (columns, the enclosing row, parameters, constants); and only
/// column types whose equal values have one representation (not floats:
/// -0 = 0), see `exec::hash_join::push_key`.
fn hash_keys(rels: &[Rel], l: usize, rel: &Rel, filters: &[Expr]) -> Vec<(usize, Expr)> {
    let plain = |e: &Expr| matches!(e, Expr::Column(_) | Expr::Outer(_) | Expr::Param(_) | Expr::Const(_));
    key_preds(rels, l, rel, filters)
        .into_iter()
        .filter(|p| {
            p.op == CmpOp::Eq
                && plain(&p.expr)
                && !matches!(rel.table.columns[p.column].ty, DataType::Float4 | DataType::Float8 | DataType::Array(_))
        })
        .map(|p| (p.column, p.expr))
        .collect()
}

/// The level's access path and whether its key is exact (PkLookup), plus
/// the equality predicates an IndexScan consumed (see `Level::key_checks`).
fn choose_access(
    catalog: &Catalog,
    rels: &[Rel],
    l: usize,
    rel: &Rel,
    filters: &mut Vec<Expr>,
    used: &mut Vec<IndexId>,
) -> (Access, bool, Vec<Expr>) {
    if let Some(source) = &rel.source {
        // Not stored: no key or index to narrow by; every filter applies.
        return (Access::Virtual(source.clone()), false, Vec::new());
    }
    let preds = key_preds(rels, l, rel, filters);
    let eq_for = |col: usize| preds.iter().find(|p| p.column == col && p.op == CmpOp::Eq);
    let table = &rel.table;
    // Primary-key point lookup: the key predicates are exact, drop them.
    let pk: Option<Vec<&KeyPred>> = table.primary_key.iter().map(|&c| eq_for(c)).collect();
    if let Some(pk) = pk {
        let key = pk.iter().map(|p| p.expr.clone()).collect();
        let mut consumed: Vec<usize> = pk.iter().map(|p| p.filter).collect();
        consumed.sort_unstable();
        consumed.dedup();
        for i in consumed.into_iter().rev() {
            filters.remove(i);
        }
        return (Access::PkLookup { key }, true, Vec::new());
    }
    let mut best: Option<(usize, Access, Vec<usize>)> = None;
    for index in catalog.indexes_of(table.id) {
        if !index.ordered {
            continue;
        }
        let mut eq = Vec::new();
        let mut eq_filters = Vec::new();
        for &c in &index.columns {
            match eq_for(c) {
                Some(p) => {
                    eq.push(p.expr.clone());
                    eq_filters.push(p.filter);
                }
                None => break,
            }
        }
        let mut lower = None;
        let mut upper = None;
        if let Some(&next) = index.columns.get(eq.len()) {
            for p in preds.iter().filter(|p| p.column == next) {
                match p.op {
                    CmpOp::Gt | CmpOp::GtEq if lower.is_none() => lower = Some((p.expr.clone(), p.op == CmpOp::GtEq)),
                    CmpOp::Lt | CmpOp::LtEq if upper.is_none() => upper = Some((p.expr.clone(), p.op == CmpOp::LtEq)),
                    _ => {}
                }
            }
            if lower.is_none()
                && upper.is_none()
                && let Some((from, below)) = like_prefix_range(rel, filters, next)
            {
                lower = Some((Expr::Const(Value::Text(from)), true));
                upper = below.map(|b| (Expr::Const(Value::Text(b)), false));
            }
        }
        // Prefer more equality columns, then a range, then a unique index.
        let score = eq.len() * 4
            + usize::from(lower.is_some())
            + usize::from(upper.is_some())
            + usize::from(index.unique && eq.len() == index.columns.len()) * 2;
        if score == 0 || best.as_ref().is_some_and(|(s, _, _)| *s >= score) {
            continue;
        }
        let key_types: Vec<DataType> = index.columns.iter().map(|&c| table.columns[c].ty).collect();
        best = Some((score, Access::IndexScan { index: index.id, eq, lower, upper, key_types }, eq_filters));
    }
    match best {
        Some((_, access, mut consumed)) => {
            if let Access::IndexScan { index, .. } = &access {
                used.push(*index);
            }
            // The equality prefix is exact at the snapshot (values are
            // converted as for a primary key: one that no stored value can
            // equal matches nothing); range bounds may be dropped when
            // inexact, so those predicates stay filters.
            consumed.sort_unstable();
            consumed.dedup();
            let mut key_checks = Vec::with_capacity(consumed.len());
            for i in consumed.into_iter().rev() {
                key_checks.push(filters.remove(i));
            }
            key_checks.reverse();
            (access, false, key_checks)
        }
        None => (Access::FullScan, false, Vec::new()),
    }
}

/// The keys `column LIKE 'prefix...'` (a constant pattern, case-sensitive,
/// over a text or varchar column) can match: from the pattern's literal
/// prefix up to, not including, its successor (None: no string is above
/// every string with the prefix). Every text comparison of pgtier and of
/// its index orders bytes (the C collation), and UTF-8's byte order is code
/// point order, so every match lies in that range; the LIKE stays a filter.
/// A pattern with a backslash is left alone, so the 22025 of one that ends
/// with the escape character is never skipped by an empty range.
fn like_prefix_range(rel: &Rel, filters: &[Expr], column: usize) -> Option<(String, Option<String>)> {
    if !matches!(rel.table.columns[column].ty, DataType::Text | DataType::Varchar(_)) {
        return None;
    }
    filters.iter().find_map(|f| {
        let Expr::Like { expr, pattern, negated: false, case_insensitive: false } = f else { return None };
        let (Expr::Column(c), Expr::Const(Value::Text(pattern))) = (expr.as_ref(), pattern.as_ref()) else {
            return None;
        };
        if *c != rel.offset + column || pattern.contains('\\') {
            return None;
        }
        let prefix: String = pattern.chars().take_while(|ch| !matches!(ch, '%' | '_')).collect();
        (!prefix.is_empty()).then(|| {
            let successor = prefix_successor(&prefix);
            (prefix, successor)
        })
    })
}

/// A string above every string that starts with `prefix` (the prefix with
/// its last character that has one replaced by the next character).
fn prefix_successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        if let Some(next) = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32) {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{conjuncts_of, prefix_successor};
    use crate::expr::{CmpOp, Expr};
    use pgtier_engine::Value;

    fn eq(a: usize, b: usize) -> Expr {
        Expr::Cmp(CmpOp::Eq, Expr::Column(a).boxed(), Expr::Column(b).boxed())
    }

    fn is(a: usize, v: i64) -> Expr {
        Expr::Cmp(CmpOp::Eq, Expr::Column(a).boxed(), Expr::Const(Value::Int8(v)).boxed())
    }

    #[test]
    fn or_arms_factor_their_common_parts() {
        let (a, b, c) = (eq(0, 3), is(1, 1), is(2, 2));
        // (A AND B) OR (B AND A AND C): A and B common, and the first arm
        // is nothing else, so the OR is A AND B (absorption).
        let or =
            Expr::Or(vec![Expr::And(vec![a.clone(), b.clone()]), Expr::And(vec![b.clone(), a.clone(), c.clone()])]);
        assert_eq!(conjuncts_of(or), vec![a.clone(), b.clone()]);
        let or = Expr::Or(vec![Expr::And(vec![a.clone(), b.clone()]), Expr::And(vec![a.clone(), c.clone()])]);
        assert_eq!(conjuncts_of(or), vec![a.clone(), Expr::Or(vec![b.clone(), c.clone()])]);
        // Inside an AND, with other parts beside it; (A AND B AND C) OR
        // (C AND A) absorbs B.
        let and = Expr::And(vec![
            is(4, 4),
            Expr::Or(vec![Expr::And(vec![a.clone(), b.clone(), c.clone()]), Expr::And(vec![c.clone(), a.clone()])]),
        ]);
        assert_eq!(conjuncts_of(and), vec![is(4, 4), a.clone(), c.clone()]);
        // Nothing common: the OR as it was.
        let or = Expr::Or(vec![Expr::And(vec![a.clone(), b.clone()]), c.clone()]);
        assert_eq!(conjuncts_of(or.clone()), vec![or]);
    }

    #[test]
    fn prefix_successors() {
        assert_eq!(prefix_successor("abc").as_deref(), Some("abd"));
        assert_eq!(prefix_successor("a\u{d7ff}").as_deref(), Some("a\u{e000}"));
        assert_eq!(prefix_successor("a\u{10ffff}").as_deref(), Some("b"));
        assert_eq!(prefix_successor("\u{10ffff}"), None);
    }
}
