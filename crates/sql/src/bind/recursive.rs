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
    /// A FROM reference to WITH query `k`: its name, row shape and source
    /// (shared by every reference when PostgreSQL would materialize it).
    pub(super) fn cte_source(&mut self, k: usize) -> Result<(String, Arc<TableSchema>, VirtualSource)> {
        if self.ctes[k].modifying.is_some() {
            return self.modifying_reference(k);
        }
        if !matches!(self.ctes[k].self_ref, SelfRef::Hidden) {
            return self.cte_reference(k);
        }
        let volatile_before = std::mem::replace(&mut self.volatile_calls, false);
        let found = self.cte_reference(k);
        let volatile = self.volatile_calls;
        self.volatile_calls |= volatile_before;
        let (name, schema, source) = found?;
        // Defined inside a recursive term, it may read the work table,
        // whose rows change from round to round: run per read.
        let in_recursive_term = self.ctes[..k].iter().any(|c| matches!(c.self_ref, SelfRef::Work { .. }));
        let def = &mut self.ctes[k];
        let materialized = matches!(def.cte.materialized, Some(ast::CteAsMaterialized::Materialized));
        // Read twice and reading no outer row (the same rows wherever it
        // is read): materialized as PostgreSQL does (unless NOT
        // MATERIALIZED), so TPC-H Q15's revenue0 is aggregated once.
        let reused = def.named_twice && def.cte.materialized.is_none() && matches!(source, VirtualSource::Query(_));
        if !(volatile || materialized || reused) || in_recursive_term {
            return Ok((name, schema, source));
        }
        def.shared = true;
        Ok((name, schema, VirtualSource::Shared { id: def.id, source: Box::new(source) }))
    }

    fn cte_reference(&mut self, k: usize) -> Result<(String, Arc<TableSchema>, VirtualSource)> {
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
        // PostgreSQL checks where the references sit before it binds
        // anything (checkWellFormedRecursion); one in the non-recursive
        // term is that term's error, given when it is bound.
        if !names(left, &name)
            && let Some(message) = forbidden_position(right, &name, false)
        {
            return Err(invalid_recursion(message));
        }
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
            (q.limit_clause.is_some() || q.fetch.is_some(), "LIMIT/OFFSET"),
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
pub(super) fn rename_columns(cte_name: &str, cols: &mut [(String, DataType)], names: Vec<String>) -> Result<()> {
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

/// Where a recursive reference sits in the recursive term, as
/// checkWellFormedRecursion sees the raw query: the first forbidden
/// position that holds one (the nullable side of an outer join, INTERSECT
/// ALL, EXCEPT's right side or EXCEPT ALL's left), as PostgreSQL's 42P19
/// message. References in expressions are the binder's (a subquery
/// there is its own error). `nullable`: `set` is on an outer join's
/// nullable side.
fn forbidden_position(set: &ast::SetExpr, name: &str, nullable: bool) -> Option<String> {
    let within = |what: &str| Some(format!("recursive reference to query \"{name}\" must not appear within {what}"));
    match set {
        ast::SetExpr::SetOperation { op: ast::SetOperator::Intersect, set_quantifier, left, right } => {
            if matches!(set_quantifier, ast::SetQuantifier::All) && (names(left, name) || names(right, name)) {
                return within("INTERSECT");
            }
            forbidden_position(left, name, nullable).or_else(|| forbidden_position(right, name, nullable))
        }
        ast::SetExpr::SetOperation { op: ast::SetOperator::Except, set_quantifier, left, right } => {
            if (matches!(set_quantifier, ast::SetQuantifier::All) && names(left, name)) || names(right, name) {
                return within("EXCEPT");
            }
            forbidden_position(left, name, nullable)
        }
        ast::SetExpr::SetOperation { left, right, .. } => {
            forbidden_position(left, name, nullable).or_else(|| forbidden_position(right, name, nullable))
        }
        ast::SetExpr::Query(q) => forbidden_position(&q.body, name, nullable),
        ast::SetExpr::Select(s) => s.from.iter().find_map(|f| forbidden_in_from(f, name, nullable)),
        _ => None,
    }
}

/// [`forbidden_position`] in one FROM item and its joins.
fn forbidden_in_from(from: &ast::TableWithJoins, name: &str, nullable: bool) -> Option<String> {
    use ast::JoinOperator as J;
    // Item 0 is `relation`, item i + 1 is join i's; the joins nest to the
    // left, so join k's left side is items 0..=k and its right side item k + 1.
    let keeps_right = |op: &J| matches!(op, J::Right(_) | J::RightOuter(_) | J::FullOuter(_));
    let keeps_left = |op: &J| matches!(op, J::Left(_) | J::LeftOuter(_) | J::FullOuter(_));
    std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation)).enumerate().find_map(|(i, factor)| {
        let nullable = nullable
            || (i > 0 && keeps_left(&from.joins[i - 1].join_operator))
            || from.joins[i..].iter().any(|j| keeps_right(&j.join_operator));
        match factor {
            ast::TableFactor::Table { name: n, args: None, .. } if nullable && is_name(n, name) => {
                Some(format!("recursive reference to query \"{name}\" must not appear within an outer join"))
            }
            ast::TableFactor::NestedJoin { table_with_joins, .. } => {
                forbidden_in_from(table_with_joins, name, nullable)
            }
            ast::TableFactor::Derived { subquery, .. } => forbidden_position(&subquery.body, name, nullable),
            _ => None,
        }
    })
}

fn is_name(n: &ast::ObjectName, name: &str) -> bool {
    matches!(n.0.as_slice(), [part] if part.as_ident().is_some_and(|i| ident(i) == name))
}

/// Whether a FROM of `set` (at any depth of joins and subqueries in FROM)
/// names `name`.
fn names(set: &ast::SetExpr, name: &str) -> bool {
    fn in_factor(factor: &ast::TableFactor, name: &str) -> bool {
        match factor {
            ast::TableFactor::Table { name: n, args: None, .. } => is_name(n, name),
            ast::TableFactor::NestedJoin { table_with_joins, .. } => in_from(table_with_joins, name),
            ast::TableFactor::Derived { subquery, .. } => names(&subquery.body, name),
            _ => false,
        }
    }
    fn in_from(from: &ast::TableWithJoins, name: &str) -> bool {
        in_factor(&from.relation, name) || from.joins.iter().any(|j| in_factor(&j.relation, name))
    }
    match set {
        ast::SetExpr::SetOperation { left, right, .. } => names(left, name) || names(right, name),
        ast::SetExpr::Query(q) => names(&q.body, name),
        ast::SetExpr::Select(s) => s.from.iter().any(|f| in_from(f, name)),
        _ => false,
    }
}
