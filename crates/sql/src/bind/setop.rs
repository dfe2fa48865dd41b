//! UNION / INTERSECT / EXCEPT and VALUES as a query.

use std::sync::Arc;

use pgtier_engine::{DataType, Value};
use sqlparser::ast;

use super::coerce::{common_type, is_untyped_value, refuse_padded_literals};
use super::select::{ordinal, output_name_match};
use super::{Binder, ExprCtx, Scope, Ty};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::plan::{Access, Level, OutputColumn, SelectPlan, SetOp, SetTree, SortKey, VirtualSource};

/// `body` as a query of its own: no WITH, ORDER BY, LIMIT or locking.
pub(super) fn bare_query(body: ast::SetExpr) -> ast::Query {
    ast::Query {
        with: None,
        body: Box::new(body),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: Vec::new(),
    }
}

impl Binder<'_> {
    /// A query whose body is a set operation or VALUES.
    pub(super) fn set_query(&mut self, q: &ast::Query, outer: Option<&Scope<'_>>) -> Result<SelectPlan> {
        let (mut tree, mut leaves) = self.set_tree(&q.body, outer)?;
        let width = leaves.first().map_or(0, |l| l.len());
        let mut types = Vec::with_capacity(width);
        for k in 0..width {
            let col: Vec<Ty> = leaves.iter().map(|l| l[k].ty).collect();
            // An arm's untyped column may be a literal (not told from NULL
            // here): with character(n), refused as a literal would be.
            let untyped: Vec<bool> = col.iter().map(Option::is_none).collect();
            refuse_padded_literals(&col, &untyped, "UNION")?;
            types.push(common_type(&col, "UNION")?.unwrap_or(DataType::Text));
        }
        self.cast_leaves(&mut tree, &types, &mut leaves.iter())?;
        let names: Vec<String> = leaves.swap_remove(0).into_iter().map(|c| c.name).collect();
        let columns: Vec<OutputColumn> =
            names.iter().zip(&types).map(|(n, t)| OutputColumn { name: n.clone(), ty: Some(*t) }).collect();
        let table = super::detached("*SELECT*", names.iter().cloned().zip(types.iter().copied()).collect());
        let mut order_by = Vec::new();
        if let Some(ob) = &q.order_by {
            let ast::OrderByKind::Expressions(items) = &ob.kind else {
                return Err(SqlError::unsupported("ORDER BY ALL"));
            };
            for item in items {
                let desc = item.options.asc == Some(false);
                let nulls_first = item.options.nulls_first.unwrap_or(desc);
                let column = match ordinal(&item.expr) {
                    Some(pos) if pos >= 1 && pos <= width => pos - 1,
                    Some(pos) => {
                        return Err(SqlError::new("42P10", format!("ORDER BY position {pos} is not in select list")));
                    }
                    None => output_name_match(&item.expr, &columns).ok_or_else(|| {
                        SqlError::unsupported(
                            "ORDER BY on a UNION/INTERSECT/EXCEPT result other than column names or numbers",
                        )
                    })?,
                };
                order_by.push(SortKey { column, desc, nulls_first });
            }
        }
        let (limit, offset) = self.limit_offset(q)?;
        if !q.locks.is_empty() {
            return Err(SqlError::unsupported("FOR UPDATE with UNION/INTERSECT/EXCEPT"));
        }
        let level = Level {
            table,
            offset: 0,
            // Read once per execution (never worth keeping), and its
            // branches may read an outer or LATERAL row.
            access: Access::Virtual(Arc::new(VirtualSource::Correlated(tree))),
            exact_key: false,
            left_join: false,
            full_join: false,
            filters: Vec::new(),
            key_checks: Vec::new(),
            post_filters: Vec::new(),
            hash_keys: Vec::new(),
        };
        Ok(SelectPlan {
            levels: vec![level],
            width,
            final_filters: Vec::new(),
            agg: None,
            windows: Vec::new(),
            projection: (0..width).map(Expr::Column).collect(),
            visible: width,
            distinct: false,
            distinct_on: Vec::new(),
            order_by,
            limit,
            with_ties: q.fetch.as_ref().is_some_and(|f| f.with_ties),
            offset,
            for_update: false,
            columns,
            point_lookup: false,
            projects_columns: false,
            index_ordered: false,
            level_masks: Vec::new(),
        })
    }

    /// Binds a set-operation tree; returns it and the output columns of each leaf, left to right.
    fn set_tree(
        &mut self,
        body: &ast::SetExpr,
        outer: Option<&Scope<'_>>,
    ) -> Result<(SetTree, Vec<Vec<OutputColumn>>)> {
        match body {
            ast::SetExpr::Select(s) => {
                let q = bare_query(ast::SetExpr::Select(s.clone()));
                let plan = self.select(s, &q, outer)?;
                let cols = plan.columns[..plan.visible].to_vec();
                Ok((SetTree::Select(Box::new(plan)), vec![cols]))
            }
            ast::SetExpr::Query(q) => {
                let plan = self.query(q, outer)?;
                let cols = plan.columns[..plan.visible].to_vec();
                Ok((SetTree::Select(Box::new(plan)), vec![cols]))
            }
            ast::SetExpr::Values(v) => {
                let scope = Scope { rels: Vec::new(), hidden: Vec::new(), star: Vec::new(), merged: Vec::new(), outer };
                let mut rows = Vec::new();
                let mut types: Vec<Vec<Ty>> = Vec::new();
                for row in &v.rows {
                    if rows.first().is_some_and(|r: &Vec<Expr>| r.len() != row.len()) {
                        return Err(SqlError::syntax("VALUES lists must all be the same length"));
                    }
                    let mut out = Vec::new();
                    for (k, e) in row.iter().enumerate() {
                        let (b, t) = self.expr(e, &scope, &mut ExprCtx::plain("VALUES"))?;
                        if types.len() <= k {
                            types.push(Vec::new());
                        }
                        types[k].push(t);
                        out.push(b);
                    }
                    rows.push(out);
                }
                let mut cols = Vec::new();
                for (k, ts) in types.iter().enumerate() {
                    let untyped: Vec<bool> = rows.iter().zip(ts).map(|(r, t)| is_untyped_value(&r[k], *t)).collect();
                    refuse_padded_literals(ts, &untyped, "VALUES")?;
                    let common = common_type(ts, "VALUES")?.or(Some(DataType::Text));
                    for (r, t) in rows.iter_mut().zip(ts) {
                        let e = std::mem::replace(&mut r[k], Expr::Const(Value::Null));
                        r[k] = self.result_cast(e, *t, common)?;
                    }
                    cols.push(OutputColumn { name: format!("column{}", k + 1), ty: common });
                }
                Ok((SetTree::Values(rows), vec![cols]))
            }
            ast::SetExpr::SetOperation { op, set_quantifier, left, right } => {
                let op = match op {
                    ast::SetOperator::Union => SetOp::Union,
                    ast::SetOperator::Intersect => SetOp::Intersect,
                    ast::SetOperator::Except => SetOp::Except,
                    other => return Err(SqlError::unsupported(format!("{other}"))),
                };
                let all = match set_quantifier {
                    ast::SetQuantifier::All => true,
                    ast::SetQuantifier::Distinct | ast::SetQuantifier::None => false,
                    other => return Err(SqlError::unsupported(format!("{other}"))),
                };
                let (l, mut lcols) = self.set_tree(left, outer)?;
                let (r, rcols) = self.set_tree(right, outer)?;
                let (lw, rw) = (lcols[0].len(), rcols[0].len());
                if lw != rw {
                    let name = match op {
                        SetOp::Union => "UNION",
                        SetOp::Intersect => "INTERSECT",
                        SetOp::Except => "EXCEPT",
                    };
                    return Err(SqlError::syntax(format!("each {name} query must have the same number of columns")));
                }
                lcols.extend(rcols);
                Ok((SetTree::Op { op, all, left: Box::new(l), right: Box::new(r) }, lcols))
            }
            _ => Err(SqlError::unsupported("this query form")),
        }
    }

    /// Casts each leaf's columns to the set's column types (`leaves` in
    /// the order [`Self::set_tree`] returned them).
    pub(super) fn cast_leaves(
        &mut self,
        tree: &mut SetTree,
        types: &[DataType],
        leaves: &mut std::slice::Iter<'_, Vec<OutputColumn>>,
    ) -> Result<()> {
        match tree {
            SetTree::Op { left, right, .. } => {
                self.cast_leaves(left, types, leaves)?;
                self.cast_leaves(right, types, leaves)?;
            }
            leaf => {
                let cols = leaves.next().ok_or_else(|| SqlError::new("XX000", "set operation leaves out of step"))?;
                for (k, ty) in types.iter().enumerate() {
                    let t = cols[k].ty;
                    if t == Some(*ty) {
                        continue;
                    }
                    match leaf {
                        SetTree::Select(plan) => {
                            let e = std::mem::replace(&mut plan.projection[k], Expr::Const(Value::Null));
                            plan.projection[k] = self.result_cast(e, t, Some(*ty))?;
                        }
                        SetTree::Values(rows) => {
                            for r in rows.iter_mut() {
                                let e = std::mem::replace(&mut r[k], Expr::Const(Value::Null));
                                r[k] = self.result_cast(e, t, Some(*ty))?;
                            }
                        }
                        SetTree::Op { .. } => {}
                    }
                }
            }
        }
        Ok(())
    }
}
