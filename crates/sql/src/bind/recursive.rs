//! WITH RECURSIVE: a WITH query of the form `non-recursive-term UNION
//! [ALL] recursive-term` whose recursive term names the query itself.
//!
//! The recursive term reads a work table (the previous round's rows) and
//! runs until a round adds no rows (exec/virtual_rows.rs). PostgreSQL's
//! restrictions are PostgreSQL's errors here (42P19): the self-reference
//! appears once, not inside a subquery in an expression,
//! not on the nullable side of an outer join, and the term has no
//! aggregate; its column types are the non-recursive term's (42804 when
//! the UNION would resolve to another type).

use std::sync::Arc;

use pgtier_engine::{DataType, TableSchema};
use sqlparser::ast;

use super::coerce::common_type;
use super::setop::bare_query;
use super::{Binder, ident};
use crate::error::{Result, SqlError};
use crate::plan::{Access, SetTree, VirtualSource};

/// What naming a WITH query means while its own definition is bound.
#[derive(Clone, Debug)]
pub(crate) enum SelfRef {
    /// Not visible (outside WITH RECURSIVE a query cannot see itself).
    Hidden,
    /// Visible but forbidden here: PostgreSQL's 42P19 message.
    Forbidden(String),
    /// The recursive term's work table, valid at subquery depth `depth`.
    Work { slot: usize, table: Arc<TableSchema>, depth: usize, refs: usize },
}

fn invalid_recursion(message: String) -> SqlError {
    SqlError::new("42P19", message)
}

impl Binder<'_> {
    /// A FROM reference to WITH query `k`: its name, row shape and source.
    pub(super) fn cte_source(&mut self, k: usize) -> Result<(String, Arc<TableSchema>, VirtualSource)> {
        let name = self.ctes[k].name.clone();
        match &mut self.ctes[k].self_ref {
            SelfRef::Forbidden(message) => return Err(invalid_recursion(message.clone())),
            SelfRef::Work { slot, table, depth, refs } => {
                // Counted first: a term whose only reference is refused is
                // still recursive (its error stands).
                *refs += 1;
                if *depth != self.sublink_depth {
                    return Err(invalid_recursion(format!(
                        "recursive reference to query \"{name}\" must not appear within a subquery"
                    )));
                }
                if *refs > 1 {
                    return Err(invalid_recursion(format!(
                        "recursive reference to query \"{name}\" must not appear more than once"
                    )));
                }
                return Ok((name, Arc::clone(table), VirtualSource::WorkTable(*slot)));
            }
            SelfRef::Hidden => {}
        }
        if self.ctes[k].recursive
            && let Some(found) = self.recursive_cte(k)?
        {
            return Ok(found);
        }
        let (plan, cte_name, columns) = self.bind_cte(k)?;
        let mut cols: Vec<(String, DataType)> =
            plan.columns[..plan.visible].iter().map(|c| (c.name.clone(), c.ty.unwrap_or(DataType::Text))).collect();
        rename_columns(&cte_name, &mut cols, columns)?;
        let tree = SetTree::Select(Box::new(plan));
        let source =
            if self.in_recursive_term() { VirtualSource::Correlated(tree) } else { VirtualSource::Query(tree) };
        Ok((cte_name.clone(), super::detached(&cte_name, cols), source))
    }

    /// A recursive term is being bound: a subquery in FROM may read its
    /// work table, whose rows change from round to round.
    pub(super) fn in_recursive_term(&self) -> bool {
        self.ctes.iter().any(|c| matches!(c.self_ref, SelfRef::Work { .. }))
    }

    /// Binds `f` with WITH query `k` visible to itself as `marker` (and
    /// the queries after it hidden); returns what `f` gave and the marker
    /// as `f` left it.
    fn within_definition<T>(
        &mut self,
        k: usize,
        marker: SelfRef,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> (Result<T>, SelfRef) {
        let later = self.ctes.split_off(k + 1);
        self.ctes[k].self_ref = marker;
        let correlated = self.correlated;
        let out = f(self);
        self.correlated = correlated;
        let marker = std::mem::replace(&mut self.ctes[k].self_ref, SelfRef::Hidden);
        self.ctes.extend(later);
        (out, marker)
    }

    /// WITH query `k` of a WITH RECURSIVE list, bound as a recursive query;
    /// None when it does not name itself (then it is an ordinary one).
    fn recursive_cte(&mut self, k: usize) -> Result<Option<(String, Arc<TableSchema>, VirtualSource)>> {
        let cte = self.ctes[k].cte.clone();
        let name = ident(&cte.alias.name);
        let q = cte.query.as_ref();
        let ast::SetExpr::SetOperation { op: ast::SetOperator::Union, set_quantifier, left, right } = q.body.as_ref()
        else {
            let marker = SelfRef::Forbidden(format!(
                "recursive query \"{name}\" does not have the form non-recursive-term UNION [ALL] recursive-term"
            ));
            let (checked, _) = self.within_definition(k, marker, |b| b.query(q, None).map(drop));
            checked?;
            return Ok(None);
        };
        let all = match set_quantifier {
            ast::SetQuantifier::All => true,
            ast::SetQuantifier::Distinct | ast::SetQuantifier::None => false,
            other => return Err(SqlError::unsupported(format!("UNION {other}"))),
        };
        let anchor_query = bare_query(left.as_ref().clone());
        let marker = SelfRef::Forbidden(format!(
            "recursive reference to query \"{name}\" must not appear within its non-recursive term"
        ));
        let (anchor, _) = self.within_definition(k, marker, |b| b.query(&anchor_query, None));
        let anchor = anchor?;
        let anchor_cols = anchor.columns[..anchor.visible].to_vec();
        let types: Vec<DataType> = anchor_cols.iter().map(|c| c.ty.unwrap_or(DataType::Text)).collect();
        let mut cols: Vec<(String, DataType)> =
            anchor_cols.iter().map(|c| c.name.clone()).zip(types.iter().copied()).collect();
        rename_columns(&name, &mut cols, cte.alias.columns.iter().map(|c| ident(&c.name)).collect())?;
        let table = super::detached(&name, cols);
        let slot = self.work_tables;
        self.work_tables += 1;
        let marker = SelfRef::Work { slot, table: Arc::clone(&table), depth: self.sublink_depth, refs: 0 };
        let (step, marker) = self.within_definition(k, marker, |b| match right.as_ref() {
            ast::SetExpr::Select(s) => b.select(s, &bare_query(ast::SetExpr::Select(s.clone())), None).map(Some),
            other => b.query(&bare_query(other.clone()), None).map(|_| None),
        });
        let step = match step? {
            // UNION of two ordinary queries.
            _ if matches!(marker, SelfRef::Work { refs: 0, .. }) => return Ok(None),
            Some(step) => step,
            None => return Err(SqlError::unsupported("a recursive term other than one SELECT")),
        };
        for (present, what) in [
            (q.order_by.is_some(), "ORDER BY"),
            (q.limit_clause.is_some(), "LIMIT/OFFSET"),
            (!q.locks.is_empty(), "FOR UPDATE/SHARE"),
        ] {
            if present {
                return Err(SqlError::unsupported(format!("{what} in a recursive query")));
            }
        }
        if step.agg.is_some() {
            return Err(invalid_recursion(
                "aggregate functions are not allowed in a recursive query's recursive term".into(),
            ));
        }
        if !step.windows.is_empty() {
            return Err(invalid_recursion(
                "window functions are not allowed in a recursive query's recursive term".into(),
            ));
        }
        if step.levels.iter().any(|l| {
            l.left_join && matches!(&l.access, Access::Virtual(v) if matches!(**v, VirtualSource::WorkTable(_)))
        }) {
            return Err(invalid_recursion(format!(
                "recursive reference to query \"{name}\" must not appear within an outer join"
            )));
        }
        let step_cols = step.columns[..step.visible].to_vec();
        if step_cols.len() != types.len() {
            return Err(SqlError::syntax("each UNION query must have the same number of columns"));
        }
        for (k, (ty, col)) in types.iter().zip(&step_cols).enumerate() {
            let overall = common_type(&[Some(*ty), col.ty], "UNION")?;
            if overall != Some(*ty) {
                let overall = overall.map_or_else(|| "unknown".to_owned(), DataType::pg_name);
                return Err(SqlError::new(
                    "42804",
                    format!("recursive query \"{name}\" column {} has type {} in non-recursive term but type {overall} overall", k + 1, ty.pg_name()),
                )
                .with_hint("Cast the output of the non-recursive term to the correct type."));
            }
        }
        let mut anchor_tree = SetTree::Select(Box::new(anchor));
        self.cast_leaves(&mut anchor_tree, &types, &mut [anchor_cols].iter())?;
        let mut step_tree = SetTree::Select(Box::new(step));
        self.cast_leaves(&mut step_tree, &types, &mut [step_cols].iter())?;
        self.ctes[k].uses += 1;
        Ok(Some((name, table, VirtualSource::Recursive { slot, anchor: anchor_tree, step: step_tree, all })))
    }
}

/// A WITH query's declared column names over its query's.
fn rename_columns(cte_name: &str, cols: &mut [(String, DataType)], names: Vec<String>) -> Result<()> {
    if names.len() > cols.len() {
        return Err(SqlError::new(
            "42P10",
            format!(
                "WITH query \"{cte_name}\" has {} columns available but {} columns specified",
                cols.len(),
                names.len()
            ),
        ));
    }
    for (c, new) in cols.iter_mut().zip(names) {
        c.0 = new;
    }
    Ok(())
}
