//! Join order by estimated size for a FROM list of inner joins.
//!
//! Levels read their relations in the order written unless every join of
//! the FROM list is an inner join (comma or [INNER] JOIN ... ON) of stored
//! tables and the statement locks no rows: then the order is free (an inner
//! join's ON is a WHERE conjunct), and the order with the least estimated
//! work is taken when it beats the written one. Estimates: the engine's
//! count of committed live rows (`catalog::TableRows`) times a fixed
//! selectivity per filter on the table alone (equality 0.1, range 0.33,
//! LIKE 0.2, ...; equalities covering the primary key: one row); a join on
//! a relation's whole primary key yields at most one row per probe, a join
//! of another relation's column to a placed relation's primary key (a
//! foreign key, as TPC-H's) divides by that relation's rows, any other
//! equi-join by 10. For each start, the next relation is the one connected
//! by an equi-join that gives the fewest rows (unconnected ones only when
//! none is connected); the cheapest of these orders, by rows read, probed
//! and produced, wins. Only the order changes: every predicate is still
//! evaluated at the first level where it is bound, so the answer is the
//! same (rows come out in another order, which SQL leaves open without
//! ORDER BY). Tables under 1,000 rows in all keep the order written.
//!
//! An OR across relations whose every arm has simple conditions on one
//! relation (TPC-H Q7's `(n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY')
//! OR (...)`) also gives that relation the OR of those conditions as a
//! filter of its own (PostgreSQL's orclauses.c): implied by the OR, so it
//! drops only rows the OR would drop, and made only of comparisons of
//! columns with constants, which cannot fail.

use crate::catalog::TableRows;
use crate::expr::{CmpOp, Expr};
use crate::plan::{Rel, VirtualSource};

use super::{JoinRel, flatten_and, level_of};

/// Below this many rows in all, the order written stays (and so does the
/// order rows come out in).
const ROWS_MIN: f64 = 1000.0;
/// Rows assumed for a subquery in FROM, whose result has no statistics
/// (PostgreSQL assumes as many for a function's result).
const SUBQUERY_ROWS_GUESS: f64 = 1000.0;
/// Rows per probe of an equi-join on columns that are no primary key.
const NON_KEY_FANOUT_DIV: f64 = 10.0;
/// The "relation" of an expression edge's other side in `join_rows`: no
/// relation, so no key it could cover.
const EXPRESSION: usize = usize::MAX;

/// What the estimate knows of one relation.
struct Sizes {
    /// Rows stored.
    rows: Vec<f64>,
    /// Rows left after the filters on the relation alone.
    filtered: Vec<f64>,
    /// Equi-joins between two relations: (rel a, column of a, rel b, column of b).
    edges: Vec<(usize, usize, usize, usize)>,
    /// Equalities of a column with an expression over other relations
    /// (CH-benCHmark's `mod(s_w_id * s_i_id, 10000) = su_suppkey`): (the
    /// relations the expression reads, as a bit mask; the column's
    /// relation; the column). They connect that relation once every one
    /// of those is placed, and can be its probe key.
    expr_edges: Vec<(u32, usize, usize)>,
    /// Primary-key columns of each relation.
    pks: Vec<Vec<usize>>,
}

/// The relations, joins and WHERE conjuncts in the order to plan them:
/// reordered (with the joins' ON conditions moved to the conjuncts) when
/// that is free and estimated cheaper, else as given.
pub fn join_order(
    sizes: &dyn TableRows,
    rels: Vec<Rel>,
    joins: Vec<JoinRel>,
    conjuncts: Vec<Expr>,
) -> (Vec<Rel>, Vec<JoinRel>, Vec<Expr>) {
    let n = rels.len();
    // A subquery in FROM that reads nothing outside it (`VirtualSource::
    // Query`: computed once per statement) may move; one that reads the
    // relations before it (LATERAL, a set-returning function) may not.
    let free = (2..=16).contains(&n)
        && rels.iter().all(|r| r.source.as_deref().is_none_or(|s| matches!(s, VirtualSource::Query(_))))
        && joins.iter().all(|j| !j.left && !j.right && !j.full);
    let rows: Option<Vec<f64>> = if free {
        rels.iter()
            .map(|r| match r.source {
                None => sizes.estimated_rows(r.table.id).map(|c| c as f64),
                Some(_) => Some(SUBQUERY_ROWS_GUESS),
            })
            .collect()
    } else {
        None
    };
    // Only stored rows count toward the threshold: a join of small tables
    // keeps its written order (and its rows' order) whatever it joins.
    let stored: f64 = rows.iter().flatten().zip(&rels).filter(|(_, r)| r.source.is_none()).map(|(c, _)| c).sum();
    let Some(rows) = rows.filter(|_| stored >= ROWS_MIN) else {
        return (rels, joins, conjuncts);
    };
    let mut all: Vec<Expr> = Vec::with_capacity(conjuncts.len());
    for e in conjuncts.iter().chain(joins.iter().flat_map(|j| j.on.iter())).cloned() {
        flatten_and(e, &mut all);
    }
    let derived = derived_filters(&rels, &all);
    all.extend(derived);
    let est = estimate(&rels, rows, &all);
    let written: Vec<usize> = (0..n).collect();
    let written_cost = cost(&est, &written).1;
    let best =
        (0..n).map(|start| greedy(&est, start)).map(|o| (cost(&est, &o).1, o)).min_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((c, order)) if c < written_cost * 0.9 && order != written => {
            let rels = order.iter().map(|&i| rels[i].clone()).collect();
            let joins = (0..n).map(|_| JoinRel { left: false, right: false, full: false, on: Vec::new() }).collect();
            (rels, joins, all)
        }
        // The order and conditions as written (the derived filters only
        // help a reordered plan).
        _ => (rels, joins, conjuncts),
    }
}

/// Which relations `e` reads, as a bit set (None: it holds a subquery).
fn rel_mask(rels: &[Rel], e: &Expr) -> Option<u32> {
    if e.has_subquery() {
        return None;
    }
    let mut mask = 0u32;
    e.walk(&mut |x| {
        if let Expr::Column(c) = x {
            mask |= 1 << level_of(rels, *c);
        }
    });
    Some(mask)
}

/// A column, or a char(n) column read as text.
fn column_of(e: &Expr) -> Option<usize> {
    match e {
        Expr::Column(c) => Some(*c),
        Expr::BpcharTrim(inner) => column_of(inner),
        _ => None,
    }
}

/// A comparison of columns with constants, which cannot fail.
fn simple(e: &Expr) -> bool {
    let operand = |x: &Expr| column_of(x).is_some() || matches!(x, Expr::Const(_));
    match e {
        Expr::Cmp(_, a, b) => operand(a) && operand(b),
        Expr::InList { expr, list, .. } => operand(expr) && list.iter().all(|x| matches!(x, Expr::Const(_))),
        _ => false,
    }
}

/// For each OR across relations whose every arm has simple conditions on
/// relation r alone: the OR of those conditions, r's own filter.
fn derived_filters(rels: &[Rel], all: &[Expr]) -> Vec<Expr> {
    let mut out = Vec::new();
    for e in all {
        let Expr::Or(arms) = e else { continue };
        let Some(mask) = rel_mask(rels, e) else { continue };
        if mask.count_ones() < 2 {
            continue;
        }
        for r in (0..rels.len()).filter(|r| mask & (1 << r) != 0) {
            let mut derived_arms = Vec::with_capacity(arms.len());
            for arm in arms {
                let mut parts = Vec::new();
                flatten_and(arm.clone(), &mut parts);
                let own: Vec<Expr> =
                    parts.into_iter().filter(|p| simple(p) && rel_mask(rels, p) == Some(1 << r)).collect();
                match own.len() {
                    0 => break,
                    1 => derived_arms.extend(own),
                    _ => derived_arms.push(Expr::And(own)),
                }
            }
            if derived_arms.len() == arms.len() {
                out.push(Expr::Or(derived_arms));
            }
        }
    }
    out
}

/// The fraction of rows a filter keeps, PostgreSQL's default guesses in
/// spirit (no statistics).
fn selectivity(e: &Expr) -> f64 {
    match e {
        Expr::Cmp(CmpOp::Eq, ..) => 0.1,
        Expr::Cmp(CmpOp::NotEq, ..) => 0.9,
        Expr::Cmp(..) => 0.33,
        Expr::Like { negated, .. } | Expr::InList { negated, .. } if *negated => 0.9,
        Expr::Like { .. } => 0.2,
        Expr::InList { list, .. } => (0.1 * list.len() as f64).min(0.5),
        Expr::Or(arms) => arms.iter().map(selectivity).sum::<f64>().min(1.0),
        Expr::And(parts) => parts.iter().map(selectivity).product(),
        _ => 0.5,
    }
}

/// Rows per relation after its own filters, and the equi-joins.
fn estimate(rels: &[Rel], rows: Vec<f64>, all: &[Expr]) -> Sizes {
    let n = rels.len();
    let mut filtered = rows.clone();
    let mut const_eq: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut edges = Vec::new();
    let mut expr_edges = Vec::new();
    for e in all {
        let Some(mask) = rel_mask(rels, e) else { continue };
        if mask.count_ones() == 1 {
            let r = mask.trailing_zeros() as usize;
            filtered[r] *= selectivity(e);
            if let Expr::Cmp(CmpOp::Eq, a, b) = e {
                for (x, y) in [(a, b), (b, a)] {
                    if let Some(c) = column_of(x)
                        && rel_mask(rels, y) == Some(0)
                    {
                        const_eq[r].push(c - rels[r].offset);
                    }
                }
            }
        } else if mask.count_ones() == 2
            && let Expr::Cmp(CmpOp::Eq, a, b) = e
            && let (Some(x), Some(y)) = (column_of(a), column_of(b))
        {
            let (ra, rb) = (level_of(rels, x), level_of(rels, y));
            edges.push((ra, x - rels[ra].offset, rb, y - rels[rb].offset));
        } else if mask.count_ones() >= 2
            && let Expr::Cmp(CmpOp::Eq, a, b) = e
        {
            for (x, y) in [(a, b), (b, a)] {
                if let Some(c) = column_of(x)
                    && let r = level_of(rels, c)
                    && let Some(m) = rel_mask(rels, y)
                    && m != 0
                    && m & (1 << r) == 0
                {
                    expr_edges.push((m, r, c - rels[r].offset));
                }
            }
        }
    }
    for (r, rel) in rels.iter().enumerate() {
        let pk = &rel.table.primary_key;
        if !pk.is_empty() && pk.iter().all(|c| const_eq[r].contains(c)) {
            filtered[r] = filtered[r].min(1.0);
        }
    }
    let pks = rels.iter().map(|r| r.table.primary_key.clone()).collect();
    Sizes { rows, filtered, edges, expr_edges, pks }
}

/// Rows after joining relation `s` to the `placed` ones that gave `c`
/// rows, whether it is connected to them, and, when `s` is read through
/// its primary key (the whole key: one row per probe; or its leading
/// columns: an index nested-loop join, as TPC-H's lineitem by l_orderkey),
/// the rows those probes read past the first of each, before `s`'s own
/// filters (none for the whole key), since no scan of all of `s` happens
/// then.
fn join_rows(est: &Sizes, placed: &[usize], c: f64, s: usize) -> (f64, bool, Option<f64>) {
    // (placed relation, its column, s's column) of each equi-join to s.
    let joins: Vec<(usize, usize, usize)> = est
        .edges
        .iter()
        .filter_map(|&(a, ca, b, cb)| {
            if a == s && placed.contains(&b) {
                Some((b, cb, ca))
            } else if b == s && placed.contains(&a) {
                Some((a, ca, cb))
            } else {
                None
            }
        })
        .chain(
            est.expr_edges
                .iter()
                .filter(|&&(m, r, _)| r == s && (0..32).filter(|b| m & (1 << b) != 0).all(|b| placed.contains(&b)))
                .map(|&(_, _, col)| (EXPRESSION, 0, col)),
        )
        .collect();
    if joins.is_empty() {
        return (c * est.filtered[s], false, None);
    }
    let s_cols: Vec<usize> = joins.iter().map(|j| j.2).collect();
    let matched = matching_rows(est, c, s, &joins);
    let by_pk = !est.pks[s].is_empty() && est.pks[s].iter().all(|k| s_cols.contains(k));
    let matched = if by_pk { matched.min(c) } else { matched };
    let kept = if est.rows[s] > 0.0 { est.filtered[s] / est.rows[s] } else { 0.0 };
    let out = matched * kept;
    // An index scan narrows by the key's leading columns equated, up to
    // the first that is not (planner.rs choose_access): a probe reads
    // every row matching that prefix, not only the rows all the joins
    // keep. Without this, stock -> order_line on (ol_w_id, ol_i_id) was
    // costed as the order lines of one item when each probe read all of a
    // warehouse's (CH-benCHmark Q21: 10 s against PostgreSQL's 8 ms).
    let prefix: Vec<usize> = est.pks[s].iter().take_while(|k| s_cols.contains(k)).copied().collect();
    if by_pk {
        return (out, true, Some(0.0));
    }
    if prefix.is_empty() {
        return (out, true, None);
    }
    let prefix_joins: Vec<(usize, usize, usize)> = joins.iter().copied().filter(|j| prefix.contains(&j.2)).collect();
    let read = matching_rows(est, c, s, &prefix_joins).max(matched);
    (out, true, Some((read - c).max(0.0)))
}

/// Rows of `s` that `c` rows of the placed relations match through
/// `joins`, before `s`'s own filters: a join covering another relation's
/// whole primary key is a foreign key to it (each of its rows matched by
/// `rows[s] / rows[other]` of s), any other divides by a fixed fan-out.
fn matching_rows(est: &Sizes, c: f64, s: usize, joins: &[(usize, usize, usize)]) -> f64 {
    let mut by_rel: Vec<(usize, Vec<usize>)> = Vec::new();
    for &(other, oc, _) in joins {
        match by_rel.iter_mut().find(|(r, _)| *r == other) {
            Some((_, cols)) => cols.push(oc),
            None => by_rel.push((other, vec![oc])),
        }
    }
    let covers = |other: usize, cols: &[usize]| {
        est.pks.get(other).is_some_and(|pk| !pk.is_empty() && pk.iter().all(|k| cols.contains(k)))
    };
    let mut matched = c * est.rows[s];
    for (other, cols) in &by_rel {
        matched /= if covers(*other, cols) { est.rows[*other].max(1.0) } else { NON_KEY_FANOUT_DIV };
    }
    matched
}

/// Greedy order from `start`: next, the connected relation giving the
/// fewest rows (any relation when none is connected).
fn greedy(est: &Sizes, start: usize) -> Vec<usize> {
    let n = est.rows.len();
    let mut order = vec![start];
    let mut c = est.filtered[start];
    while order.len() < n {
        let mut best: Option<(bool, f64, usize)> = None;
        for s in (0..n).filter(|s| !order.contains(s)) {
            let (rows, connected, _) = join_rows(est, &order, c, s);
            let better = match best {
                None => true,
                Some((bc, br, _)) => (connected && !bc) || (connected == bc && rows < br),
            };
            if better {
                best = Some((connected, rows, s));
            }
        }
        let Some((_, rows, s)) = best else { break };
        order.push(s);
        c = rows;
    }
    order
}

/// Estimated work of an order: rows read (a relation not read through its
/// primary key is read whole once, into a hash table; one read through
/// its key's leading column reads the rows its probes match), probes and
/// rows produced at each level. Without the key-prefix case, TPC-H Q10 started from a scan of all
/// of lineitem (6x slower than the order written); without counting the
/// rows probes read, Q12 probed lineitem once per order (15x PostgreSQL's
/// time at SF 0.1) instead of probing orders once per filtered lineitem.
/// Returns (final rows, work).
fn cost(est: &Sizes, order: &[usize]) -> (f64, f64) {
    let Some((&first, rest)) = order.split_first() else { return (0.0, 0.0) };
    let mut c = est.filtered[first];
    let mut work = est.rows[first] + c;
    let mut placed = vec![first];
    for &s in rest {
        let (rows, _, probe_reads) = join_rows(est, &placed, c, s);
        work += probe_reads.unwrap_or(est.rows[s]) + c + rows;
        c = rows;
        placed.push(s);
    }
    (c, work)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// orders (o_orderkey its key) and lineitem (key l_orderkey,
    /// l_linenumber) at TPC-H SF 0.1, joined on the order key, with the
    /// fraction of lineitem its filters keep.
    fn orders_lineitem(orders_kept: f64, lineitem_kept: f64) -> Sizes {
        Sizes {
            rows: vec![150_000.0, 600_000.0],
            filtered: vec![150_000.0 * orders_kept, 600_000.0 * lineitem_kept],
            edges: vec![(0, 0, 1, 0)],
            expr_edges: Vec::new(),
            pks: vec![vec![0], vec![0, 3]],
        }
    }

    /// Q12: lineitem filtered to 0.24 %, orders not at all. Probing
    /// lineitem once per order reads all of it through the index; reading
    /// lineitem once and probing orders by its key is the cheaper order.
    #[test]
    fn probes_count_the_rows_they_read() {
        let est = orders_lineitem(1.0, 0.0024);
        let (orders_first, lineitem_first) = (cost(&est, &[0, 1]).1, cost(&est, &[1, 0]).1);
        assert!(lineitem_first < orders_first * 0.9, "{lineitem_first} vs {orders_first}");
        assert_eq!(greedy(&est, 1), vec![1, 0]);
    }

    /// Q14: lineitem filtered to a month (11 %) joined to part by part's
    /// key: reading lineitem and probing part once per row it keeps stays
    /// cheaper than reading part first and hashing all of lineitem (its
    /// l_partkey is no key prefix).
    #[test]
    fn a_whole_key_probe_reads_one_row() {
        let est = Sizes {
            rows: vec![600_000.0, 20_000.0],
            filtered: vec![600_000.0 * 0.11, 20_000.0],
            edges: vec![(0, 1, 1, 0)],
            expr_edges: Vec::new(),
            pks: vec![vec![0, 3], vec![0]],
        };
        let (lineitem_first, part_first) = (cost(&est, &[0, 1]).1, cost(&est, &[1, 0]).1);
        assert!(part_first >= lineitem_first * 0.9, "{part_first} vs {lineitem_first}");
    }

    /// Q10: orders filtered to a quarter's dates (11 %), lineitem to one
    /// return flag (10 %): probing lineitem by l_orderkey for the orders
    /// kept reads far less than a scan of all of lineitem.
    #[test]
    fn a_key_prefix_probe_beats_a_scan() {
        let est = orders_lineitem(0.11, 0.1);
        let (orders_first, lineitem_first) = (cost(&est, &[0, 1]).1, cost(&est, &[1, 0]).1);
        assert!(orders_first < lineitem_first * 0.9, "{orders_first} vs {lineitem_first}");
    }

    /// CH-benCHmark Q21: stock (key s_w_id, s_i_id) joined to order_line
    /// (key ol_w_id, ol_d_id, ol_o_id, ol_number) on both of stock's key
    /// columns. Probing order_line from stock narrows by ol_w_id alone and
    /// reads a whole warehouse per probe; reading order_line once and
    /// probing stock by its whole key is far cheaper.
    #[test]
    fn a_probe_reads_what_its_key_prefix_matches() {
        let est = Sizes {
            rows: vec![100_000.0, 300_000.0],
            filtered: vec![100_000.0, 300_000.0],
            edges: vec![(0, 0, 1, 2), (0, 1, 1, 4)],
            expr_edges: Vec::new(),
            pks: vec![vec![0, 1], vec![2, 1, 0, 3]],
        };
        let (stock_first, order_line_first) = (cost(&est, &[0, 1]).1, cost(&est, &[1, 0]).1);
        assert!(order_line_first < stock_first * 0.9, "{order_line_first} vs {stock_first}");
        assert_eq!(greedy(&est, 1), vec![1, 0]);
    }

    /// CH-benCHmark Q5: stock (0) reaches supplier (1) only through
    /// `mod(s_w_id * s_i_id, 10000) = su_suppkey`, supplier's key; nation
    /// (2) and region (3, filtered to one row) hang off supplier. Taking
    /// the expression as a join puts supplier (one probe per stock row)
    /// next instead of a cross join with region that nation then fans out
    /// twelvefold.
    #[test]
    fn an_expression_equal_to_a_key_connects_its_relation() {
        let est = Sizes {
            rows: vec![30_000.0, 10_000.0, 62.0, 5.0],
            filtered: vec![30_000.0, 10_000.0, 62.0, 1.0],
            edges: vec![(1, 1, 2, 0), (2, 1, 3, 0)],
            expr_edges: vec![(1 << 0, 1, 0)],
            pks: vec![vec![0], vec![0], vec![0], vec![0]],
        };
        assert_eq!(greedy(&est, 0), vec![0, 1, 2, 3]);
    }
}
