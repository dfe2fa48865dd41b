//! `pg_get_viewdef`: a view's query as PostgreSQL 15's ruleutils.c prints
//! it (every column qualified, `SELECT` list one item a line, FROM / WHERE
//! / GROUP BY / ... on lines of their own, `;` at the end; `pretty` drops
//! the parentheses PostgreSQL's precedence does not need). pgtier keeps the
//! query as text, not PostgreSQL's analysed tree, so only the shapes whose
//! printed form follows from the text and the column types are printed;
//! anything else (a literal PostgreSQL would coerce, a subquery, a set
//! operation, a cast, ...) is 0A000 rather than a text that differs.

use pgtier_engine::{Catalog, DataType, TableSchema};
use sqlparser::ast::{self, BinaryOperator as B, Expr as E};

use super::deparse::quote_ident;
use super::views::{is_view, view_def};
use crate::error::{Result, SqlError};

/// The text of view `v`'s definition (`pg_get_viewdef(v, pretty)`).
pub fn view_definition(catalog: &Catalog, v: &TableSchema, pretty: bool) -> Result<String> {
    let def = view_def(v).ok_or_else(|| SqlError::new("42809", format!("\"{}\" is not a view", v.name)))?;
    let q = parse_query(&def.query)?;
    let names: Vec<&str> = v.visible_columns().iter().map(|c| c.name.as_str()).collect();
    let mut d = Deparser { catalog, pretty, rels: Vec::new(), out: String::new() };
    d.query(&q, &names)?;
    d.out.push(';');
    Ok(d.out)
}

/// PostgreSQL's test for an automatically updatable view (the columns of
/// information_schema.views and .tables that say so): one table or
/// updatable view in FROM and none of WITH, DISTINCT, GROUP BY, HAVING,
/// LIMIT / OFFSET, set operations, aggregate or window functions.
pub fn is_auto_updatable(catalog: &Catalog, v: &TableSchema) -> bool {
    let Some(q) = view_def(v).and_then(|d| parse_query(&d.query).ok()) else { return false };
    let ast::SetExpr::Select(s) = q.body.as_ref() else { return false };
    if q.with.is_some() || q.limit_clause.is_some() || q.fetch.is_some() || s.distinct.is_some() || s.having.is_some() {
        return false;
    }
    if !matches!(&s.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty()) {
        return false;
    }
    let [twj] = s.from.as_slice() else { return false };
    if !twj.joins.is_empty() {
        return false;
    }
    let ast::TableFactor::Table { name, args: None, .. } = &twj.relation else { return false };
    let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident()).map(ident).collect();
    let key = match parts.as_slice() {
        [s, n] => crate::names::stored(s, n),
        _ => parts.last().cloned().unwrap_or_default(),
    };
    let Some(t) = catalog.table_by_name(&key) else { return false };
    if is_view(t) && !is_auto_updatable(catalog, t) {
        return false;
    }
    !s.projection.iter().any(|item| item.to_string().contains('('))
}

fn parse_query(sql: &str) -> Result<ast::Query> {
    let stmts = crate::parse::parse_sql(sql)
        .map_err(|e| SqlError::new("XX000", format!("stored view query does not parse: {e}")))?;
    match stmts.into_iter().next() {
        Some(ast::Statement::Query(q)) => Ok(*q),
        _ => Err(SqlError::new("XX000", "stored view query is not a query")),
    }
}

fn refuse(what: impl std::fmt::Display) -> SqlError {
    SqlError::unsupported(format!("pg_get_viewdef of a view with {what}"))
}

/// A FROM relation: the name columns are qualified with, and its columns.
struct RelCols {
    refname: String,
    columns: Vec<(String, DataType)>,
}

/// What the printer needs to know of an expression's type: whether
/// PostgreSQL would add a cast or label a literal.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// int2, int4, int8 (their operators mix without casts).
    Int,
    Numeric,
    Text,
    Bool,
    /// A quoted literal whose type comes from the other operand.
    Unknown,
    /// varchar(n): text operators see it through an implicit cast.
    Varchar,
    Other,
}

fn kind_of(ty: DataType) -> Kind {
    match ty {
        DataType::Int2 | DataType::Int4 | DataType::Int8 => Kind::Int,
        DataType::Numeric { .. } => Kind::Numeric,
        DataType::Text => Kind::Text,
        DataType::Varchar(_) => Kind::Varchar,
        DataType::Bool => Kind::Bool,
        _ => Kind::Other,
    }
}

/// A printed expression: its text, its kind, and what node PostgreSQL
/// would have (for the parenthesis rules of `isSimpleNode`).
struct Printed {
    text: String,
    kind: Kind,
    node: Node,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Node {
    /// Column, constant, function call: never parenthesised.
    Simple,
    /// A binary operator (its name).
    Op(&'static str),
    And,
    Or,
    Not,
    /// IS [NOT] NULL.
    NullTest,
    /// `x = ANY (ARRAY[...])`: parenthesised under anything.
    ArrayOp,
}

struct Deparser<'c> {
    catalog: &'c Catalog,
    pretty: bool,
    rels: Vec<RelCols>,
    out: String,
}

impl Deparser<'_> {
    fn query(&mut self, q: &ast::Query, names: &[&str]) -> Result<()> {
        if q.with.is_some() || q.fetch.is_some() || !q.locks.is_empty() {
            return Err(refuse("WITH, FETCH or FOR UPDATE"));
        }
        let ast::SetExpr::Select(s) = q.body.as_ref() else { return Err(refuse("a set operation or VALUES")) };
        if s.top.is_some()
            || s.into.is_some()
            || !s.lateral_views.is_empty()
            || s.qualify.is_some()
            || !s.named_window.is_empty()
        {
            return Err(refuse("this SELECT form"));
        }
        // FROM first: the select list's columns are qualified from it.
        let from = self.print_from(&s.from)?;
        self.out.push_str(" SELECT ");
        match &s.distinct {
            None => {}
            Some(ast::Distinct::Distinct) => self.out.push_str("DISTINCT "),
            Some(_) => return Err(refuse("DISTINCT ON")),
        }
        let targets = self.targets(&s.projection)?;
        self.target_list(&targets, names)?;
        if !s.from.is_empty() {
            self.out.push_str("\n   FROM ");
            self.out.push_str(&from);
        }
        if let Some(w) = &s.selection {
            let p = self.expr(w)?;
            self.out.push_str("\n  WHERE ");
            self.out.push_str(&p.text);
        }
        self.group_by_having(s, &targets)?;
        self.order_by_limit(q, &targets)
    }

    /// The FROM list as ruleutils prints it (joins parenthesized unless
    /// pretty).
    fn print_from(&mut self, items: &[ast::TableWithJoins]) -> Result<String> {
        let mut from = String::new();
        for (k, twj) in items.iter().enumerate() {
            if k > 0 {
                from.push(',');
                from.push('\n');
                from.push_str("    ");
            }
            let start = from.len();
            self.relation_item(&twj.relation, &mut from)?;
            for j in &twj.joins {
                let (kw, on) = match &j.join_operator {
                    ast::JoinOperator::Join(ast::JoinConstraint::On(e))
                    | ast::JoinOperator::Inner(ast::JoinConstraint::On(e)) => ("JOIN", Some(e)),
                    ast::JoinOperator::Left(ast::JoinConstraint::On(e))
                    | ast::JoinOperator::LeftOuter(ast::JoinConstraint::On(e)) => ("LEFT JOIN", Some(e)),
                    ast::JoinOperator::CrossJoin(ast::JoinConstraint::None) => ("CROSS JOIN", None),
                    _ => return Err(refuse("this join form")),
                };
                if !self.pretty {
                    from.insert(start, '(');
                }
                from.push_str("\n     ");
                from.push_str(kw);
                from.push(' ');
                self.relation_item(&j.relation, &mut from)?;
                if let Some(e) = on {
                    let p = self.expr(e)?;
                    from.push_str(" ON ");
                    // ON adds parentheses of its own when not pretty.
                    if self.pretty { from.push_str(&p.text) } else { from.push_str(&format!("({})", p.text)) }
                }
                if !self.pretty {
                    from.push(')');
                }
            }
        }
        Ok(from)
    }

    /// Each select-list item printed, with the column name it has of its
    /// own (None: the view's column name must be given with AS).
    fn targets(&mut self, items: &[ast::SelectItem]) -> Result<Vec<(Printed, Option<String>)>> {
        let mut targets: Vec<(Printed, Option<String>)> = Vec::new();
        for item in items {
            match item {
                ast::SelectItem::UnnamedExpr(e) => {
                    let p = self.expr(e)?;
                    let var = column_name(e);
                    targets.push((p, var));
                }
                ast::SelectItem::ExprWithAlias { expr, .. } => {
                    let p = self.expr(expr)?;
                    targets.push((p, column_name(expr)));
                }
                ast::SelectItem::Wildcard(o) => {
                    if wildcard_has_options(o) {
                        return Err(refuse("wildcard options"));
                    }
                    for r in &self.rels {
                        for (c, ty) in &r.columns {
                            targets.push((
                                Printed {
                                    text: format!("{}.{}", quote_ident(&r.refname), quote_ident(c)),
                                    kind: kind_of(*ty),
                                    node: Node::Simple,
                                },
                                Some(c.clone()),
                            ));
                        }
                    }
                }
                ast::SelectItem::QualifiedWildcard(ast::SelectItemQualifiedWildcardKind::ObjectName(n), o) => {
                    if wildcard_has_options(o) {
                        return Err(refuse("wildcard options"));
                    }
                    let q = n.0.last().and_then(|p| p.as_ident()).map(ident).unwrap_or_default();
                    let r = self.rels.iter().find(|r| r.refname == q).ok_or_else(|| refuse("this qualified *"))?;
                    for (c, ty) in &r.columns {
                        targets.push((
                            Printed {
                                text: format!("{}.{}", quote_ident(&r.refname), quote_ident(c)),
                                kind: kind_of(*ty),
                                node: Node::Simple,
                            },
                            Some(c.clone()),
                        ));
                    }
                }
                ast::SelectItem::QualifiedWildcard(..) | ast::SelectItem::ExprWithAliases { .. } => {
                    return Err(refuse("this select-list item"));
                }
            }
        }
        Ok(targets)
    }

    /// The select list, each item named as the view's column is.
    fn target_list(&mut self, targets: &[(Printed, Option<String>)], names: &[&str]) -> Result<()> {
        if targets.len() != names.len() {
            return Err(refuse("a select list pgtier cannot line up with its columns"));
        }
        for (k, ((p, var), name)) in targets.iter().zip(names).enumerate() {
            if k > 0 {
                self.out.push_str(",\n    ");
            }
            self.out.push_str(&p.text);
            if p.kind == Kind::Unknown {
                // An untyped literal as a view column is text (PostgreSQL 10 and later).
                self.out.push_str("::text");
            }
            if var.as_deref() != Some(*name) {
                self.out.push_str(" AS ");
                self.out.push_str(&quote_ident(name));
            }
        }
        Ok(())
    }

    fn group_by_having(&mut self, s: &ast::Select, targets: &[(Printed, Option<String>)]) -> Result<()> {
        match &s.group_by {
            ast::GroupByExpr::Expressions(e, m) if m.is_empty() => {
                if !e.is_empty() {
                    let items = e.iter().map(|x| self.sort_item(x, targets)).collect::<Result<Vec<_>>>()?;
                    self.out.push_str("\n  GROUP BY ");
                    self.out.push_str(&items.join(", "));
                }
            }
            _ => return Err(refuse("GROUP BY ALL or grouping sets")),
        }
        if let Some(h) = &s.having {
            let p = self.expr(h)?;
            self.out.push_str("\n HAVING ");
            self.out.push_str(&p.text);
        }
        Ok(())
    }

    fn order_by_limit(&mut self, q: &ast::Query, targets: &[(Printed, Option<String>)]) -> Result<()> {
        if q.fetch.is_some() {
            return Err(refuse("FETCH FIRST"));
        }
        if let Some(ob) = &q.order_by {
            let ast::OrderByKind::Expressions(items) = &ob.kind else { return Err(refuse("ORDER BY ALL")) };
            let mut parts = Vec::new();
            for o in items {
                if o.with_fill.is_some() || o.options.nulls_first.is_some() {
                    return Err(refuse("NULLS FIRST/LAST"));
                }
                let mut t = self.sort_item(&o.expr, targets)?;
                if o.options.asc == Some(false) {
                    t.push_str(" DESC");
                }
                parts.push(t);
            }
            self.out.push_str("\n  ORDER BY ");
            self.out.push_str(&parts.join(", "));
        }
        match &q.limit_clause {
            None => {}
            Some(ast::LimitClause::LimitOffset { limit, offset, limit_by }) if limit_by.is_empty() => {
                if let Some(o) = offset {
                    let p = self.expr(&o.value)?;
                    self.out.push_str("\n OFFSET ");
                    self.out.push_str(&p.text);
                }
                if let Some(l) = limit {
                    let p = self.expr(l)?;
                    self.out.push_str("\n LIMIT ");
                    self.out.push_str(&p.text);
                }
            }
            Some(_) => return Err(refuse("this LIMIT form")),
        }
        Ok(())
    }

    /// A GROUP BY / ORDER BY item: a select-list position or output name
    /// stands for that item's expression.
    fn sort_item(&mut self, e: &E, targets: &[(Printed, Option<String>)]) -> Result<String> {
        if let E::Value(v) = e
            && let ast::Value::Number(n, _) = &v.value
        {
            let k: usize = n.parse().map_err(|_| refuse("this ORDER BY position"))?;
            return targets
                .get(k.wrapping_sub(1))
                .map(|t| t.0.text.clone())
                .ok_or_else(|| refuse("this ORDER BY position"));
        }
        Ok(self.expr(e)?.text)
    }

    fn relation_item(&mut self, f: &ast::TableFactor, out: &mut String) -> Result<()> {
        let ast::TableFactor::Table { name, alias, args: None, .. } = f else { return Err(refuse("this FROM item")) };
        let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident()).map(ident).collect();
        let (key, tname) = match parts.as_slice() {
            [n] => (n.clone(), n.clone()),
            [s, n] => (crate::names::stored(s, n), n.clone()),
            _ => return Err(refuse("a relation name of three parts")),
        };
        let t = self.catalog.table_by_name(&key).ok_or_else(|| refuse("a relation that no longer exists"))?;
        if let (schema, _) = crate::names::split(&key)
            && schema != crate::names::PUBLIC
        {
            out.push_str(&quote_ident(schema));
            out.push('.');
        }
        out.push_str(&quote_ident(&tname));
        let refname = match alias {
            Some(a) if !a.columns.is_empty() => return Err(refuse("column aliases in FROM")),
            Some(a) => {
                let n = ident(&a.name);
                out.push(' ');
                out.push_str(&quote_ident(&n));
                n
            }
            None => tname,
        };
        let columns = super::views::column_types(t);
        self.rels.push(RelCols { refname, columns });
        Ok(())
    }

    fn column(&self, qual: Option<&str>, name: &str) -> Result<Printed> {
        let mut found = None;
        for r in self.rels.iter().filter(|r| qual.is_none_or(|q| q == r.refname)) {
            if let Some((_, ty)) = r.columns.iter().find(|(c, _)| c == name) {
                if found.is_some() {
                    return Err(refuse("an ambiguous column"));
                }
                found = Some((r.refname.clone(), *ty));
            }
        }
        let (rel, ty) = found.ok_or_else(|| refuse("a column pgtier cannot place"))?;
        Ok(Printed {
            text: format!("{}.{}", quote_ident(&rel), quote_ident(name)),
            kind: kind_of(ty),
            node: Node::Simple,
        })
    }

    /// The type of a plain column reference.
    fn column_type(&self, e: &E) -> Option<DataType> {
        let (qual, name) = match strip_nested(e) {
            E::Identifier(i) => (None, ident(i)),
            E::CompoundIdentifier(p) if p.len() == 2 => (Some(ident(&p[0])), ident(&p[1])),
            _ => return None,
        };
        self.rels
            .iter()
            .filter(|r| qual.as_deref().is_none_or(|q| q == r.refname))
            .find_map(|r| r.columns.iter().find(|(c, _)| *c == name).map(|(_, ty)| *ty))
    }

    fn expr(&mut self, e: &E) -> Result<Printed> {
        let simple = |text: String, kind: Kind| Printed { text, kind, node: Node::Simple };
        match e {
            E::Identifier(i) => self.column(None, &ident(i)),
            E::CompoundIdentifier(p) if p.len() == 2 => self.column(Some(&ident(&p[0])), &ident(&p[1])),
            E::Nested(inner) => self.expr(inner),
            E::Value(v) => literal(v),
            E::BinaryOp { left, op, right } => self.binary(left, op, right),
            // The grammar folds a minus into an integer literal; a negative
            // int4 constant prints quoted and labelled.
            E::UnaryOp { op: ast::UnaryOperator::Minus, expr }
                if let E::Value(v) = expr.as_ref()
                    && let ast::Value::Number(n, _) = &v.value
                    && n.bytes().all(|b| b.is_ascii_digit()) =>
            {
                if format!("-{n}").parse::<i32>().is_err() {
                    return Err(refuse("an integer literal beyond int4"));
                }
                Ok(simple(format!("'-{n}'::integer"), Kind::Int))
            }
            E::UnaryOp { op: ast::UnaryOperator::Not, expr } => {
                let a = self.expr(expr)?;
                self.bool_expr(Node::Not, vec![a])
            }
            E::IsNull(inner) | E::IsNotNull(inner) => {
                let a = self.expr(inner)?;
                let what = if matches!(e, E::IsNull(_)) { "IS NULL" } else { "IS NOT NULL" };
                let arg = self.arg(&a, Node::NullTest);
                let text = if self.pretty { format!("{arg} {what}") } else { format!("({arg} {what})") };
                Ok(Printed { text, kind: Kind::Bool, node: Node::NullTest })
            }
            E::Function(f) => self.function(f),
            E::Cast {
                kind: ast::CastKind::DoubleColon | ast::CastKind::Cast, expr, data_type, format: None, ..
            } => self.cast(e, expr, data_type),
            E::InList { expr, list, negated } => self.in_list(expr, list, *negated),
            E::Between { expr, negated: false, low, high } => {
                let (a, lo, hi) = (self.expr(expr)?, self.expr(low)?, self.expr(high)?);
                let a2 = Printed { text: a.text.clone(), kind: a.kind, node: a.node };
                let (ge, le) = (self.operator(">=", a, lo)?, self.operator("<=", a2, hi)?);
                self.bool_expr(Node::And, vec![ge, le])
            }
            other => Err(refuse(format!("the expression {}", truncate(&other.to_string())))),
        }
    }

    fn binary(&mut self, left: &E, op: &B, right: &E) -> Result<Printed> {
        let name: &'static str = match op {
            B::And => "AND",
            B::Or => "OR",
            B::Eq => "=",
            B::NotEq => "<>",
            B::Lt => "<",
            B::LtEq => "<=",
            B::Gt => ">",
            B::GtEq => ">=",
            B::Plus => "+",
            B::Minus => "-",
            B::Multiply => "*",
            B::Divide => "/",
            B::Modulo => "%",
            B::StringConcat => "||",
            _ => return Err(refuse(format!("the operator {op}"))),
        };
        if matches!(op, B::And | B::Or) {
            // The grammar makes `a AND b AND c` one node of three
            // arguments (a left operand of the same kind is merged).
            let mut args = Vec::new();
            let mut l: &E = left;
            let mut rights = vec![right];
            while let E::BinaryOp { left: ll, op: lop, right: lr } = strip_nested(l)
                && lop == op
            {
                rights.push(lr);
                l = ll;
            }
            args.push(self.expr(l)?);
            for r in rights.into_iter().rev() {
                args.push(self.expr(r)?);
            }
            return self.bool_expr(if *op == B::And { Node::And } else { Node::Or }, args);
        }
        let (l, r) = (self.expr(left)?, self.expr(right)?);
        self.operator(name, l, r)
    }

    /// A cast as ruleutils prints one that is neither folded nor dropped.
    fn cast(&mut self, e: &E, expr: &E, data_type: &ast::DataType) -> Result<Printed> {
        let simple = |text: String, kind: Kind| Printed { text, kind, node: Node::Simple };
        let a = self.expr(expr)?;
        let (name, kind) = cast_target(data_type).ok_or_else(|| refuse(format!("a cast to {data_type}")))?;
        // A literal is folded into a constant of the type, a cast to
        // the operand's own type disappears: neither is printed here.
        let same = match (a.kind, self.column_type(expr)) {
            (Kind::Int, Some(ty)) => crate::value::type_name(ty) == name,
            (Kind::Int, None) => true,
            (k, _) => k == kind,
        };
        if same
            || a.node != Node::Simple
            || matches!(a.kind, Kind::Unknown | Kind::Bool | Kind::Other)
            || a.text.starts_with(|c: char| c.is_ascii_digit() || c == '\'')
        {
            return Err(refuse(format!("the cast {}", truncate(&e.to_string()))));
        }
        let text = if self.pretty { format!("{}::{name}", a.text) } else { format!("({})::{name}", a.text) };
        Ok(simple(text, kind))
    }

    /// `x [NOT] IN (integers)`, which PostgreSQL keeps as `= ANY (ARRAY[...])`.
    fn in_list(&mut self, expr: &E, list: &[E], negated: bool) -> Result<Printed> {
        let a = self.expr(expr)?;
        let mut items = Vec::new();
        for x in list {
            let p = self.expr(x)?;
            if p.kind != Kind::Int || a.kind != Kind::Int || p.node != Node::Simple {
                return Err(refuse("IN of a list that is not of integers"));
            }
            items.push(p.text);
        }
        let op = if negated { "<> ALL" } else { "= ANY" };
        let body = format!("{} {op} (ARRAY[{}])", a.text, items.join(", "));
        Ok(Printed {
            text: if self.pretty { body } else { format!("({body})") },
            kind: Kind::Bool,
            node: Node::ArrayOp,
        })
    }

    /// An aggregate call PostgreSQL prints as written: count(*) and
    /// count / sum / min / max / avg of one plain argument.
    fn function(&mut self, f: &ast::Function) -> Result<Printed> {
        let name = f.name.to_string().to_lowercase();
        if f.filter.is_some()
            || f.over.is_some()
            || !f.within_group.is_empty()
            || f.null_treatment.is_some()
            || !matches!(f.parameters, ast::FunctionArguments::None)
        {
            return Err(refuse(format!("the call {}", truncate(&f.to_string()))));
        }
        let ast::FunctionArguments::List(list) = &f.args else {
            return Err(refuse(format!("the call {}", truncate(&f.to_string()))));
        };
        if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
            return Err(refuse("DISTINCT or ORDER BY in an aggregate"));
        }
        match (name.as_str(), list.args.as_slice()) {
            ("count", [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)]) => {
                Ok(Printed { text: "count(*)".into(), kind: Kind::Int, node: Node::Simple })
            }
            ("count" | "sum" | "min" | "max", [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(a))]) => {
                let a = self.expr(a)?;
                if a.kind == Kind::Unknown || (name != "count" && a.kind != Kind::Int) {
                    return Err(refuse(format!("{name}() of this argument")));
                }
                Ok(Printed {
                    text: format!("{name}({})", a.text),
                    kind: if name == "count" || a.kind == Kind::Int { Kind::Int } else { Kind::Other },
                    node: Node::Simple,
                })
            }
            _ => Err(refuse(format!("the call {}", truncate(&f.to_string())))),
        }
    }

    fn operator(&self, name: &'static str, mut l: Printed, mut r: Printed) -> Result<Printed> {
        // An unknown literal takes the other side's type; PostgreSQL then
        // labels it (`'x'::text`). Only text is printed here: other types
        // fold the literal into a constant of their own form.
        // varchar meets text operators through an implicit cast PostgreSQL prints.
        let pretty = self.pretty;
        let to_text = |p: &mut Printed| {
            if p.kind == Kind::Varchar && p.node == Node::Simple {
                p.text = if pretty { format!("{}::text", p.text) } else { format!("({})::text", p.text) };
                p.kind = Kind::Text;
            }
        };
        to_text(&mut l);
        to_text(&mut r);
        let label = |p: &mut Printed, other: Kind| -> Result<()> {
            if p.kind == Kind::Unknown {
                if other != Kind::Text {
                    return Err(refuse("a quoted literal compared with a non-text value"));
                }
                p.text.push_str("::text");
                p.kind = Kind::Text;
            }
            Ok(())
        };
        if name == "||" {
            if l.kind == Kind::Unknown && r.kind == Kind::Unknown {
                return Err(refuse("|| of two literals"));
            }
            let (lk, rk) = (l.kind, r.kind);
            label(&mut l, if rk == Kind::Unknown { Kind::Text } else { rk })?;
            label(&mut r, if lk == Kind::Unknown { Kind::Text } else { lk })?;
            if l.kind != Kind::Text || r.kind != Kind::Text {
                return Err(refuse("|| of non-text values"));
            }
        } else {
            let (lk, rk) = (l.kind, r.kind);
            label(&mut l, rk)?;
            label(&mut r, lk)?;
            let ok = l.kind == r.kind
                && matches!(l.kind, Kind::Int | Kind::Text | Kind::Numeric)
                && (matches!(name, "=" | "<>" | "<" | "<=" | ">" | ">=") || l.kind != Kind::Text);
            if !ok {
                return Err(refuse(format!("{name} between these types")));
            }
        }
        let node = Node::Op(name);
        let (la, ra) = (self.arg_op(&l, node, true), self.arg_op(&r, node, false));
        let kind = if matches!(name, "=" | "<>" | "<" | "<=" | ">" | ">=") { Kind::Bool } else { l.kind };
        let text = if self.pretty { format!("{la} {name} {ra}") } else { format!("({la} {name} {ra})") };
        Ok(Printed { text, kind, node })
    }

    fn bool_expr(&self, node: Node, args: Vec<Printed>) -> Result<Printed> {
        if args.iter().any(|a| a.kind != Kind::Bool) {
            return Err(refuse("AND / OR / NOT of a non-boolean"));
        }
        let parts: Vec<String> = args.iter().map(|a| self.arg(a, node)).collect();
        let body = match node {
            Node::Not => format!("NOT {}", parts.join("")),
            Node::And => parts.join(" AND "),
            _ => parts.join(" OR "),
        };
        let text = if self.pretty { body } else { format!("({body})") };
        Ok(Printed { text, kind: Kind::Bool, node })
    }

    /// An argument of a boolean node or null test, parenthesised as
    /// `get_rule_expr_paren` does.
    fn arg(&self, a: &Printed, parent: Node) -> String {
        if !self.pretty || simple_under(a.node, parent, None) { a.text.clone() } else { format!("({})", a.text) }
    }

    fn arg_op(&self, a: &Printed, parent: Node, left: bool) -> String {
        if !self.pretty || simple_under(a.node, parent, Some(left)) { a.text.clone() } else { format!("({})", a.text) }
    }
}

/// ruleutils.c's `isSimpleNode` for the nodes printed here (`left`: the
/// child is its operator parent's left argument).
fn simple_under(node: Node, parent: Node, left: Option<bool>) -> bool {
    match node {
        Node::Simple => true,
        Node::Op(op) => {
            if let Node::Op(pop) = parent {
                let lo = |o: &str| o == "+" || o == "-";
                let hi = |o: &str| o == "*" || o == "/" || o == "%";
                if !(lo(op) || hi(op)) || !(lo(pop) || hi(pop)) {
                    return false;
                }
                if hi(op) && lo(pop) {
                    return true;
                }
                if lo(op) && hi(pop) {
                    return false;
                }
                return left == Some(true);
            }
            matches!(parent, Node::And | Node::Or | Node::Not)
        }
        Node::NullTest => matches!(parent, Node::And | Node::Or | Node::Not),
        Node::ArrayOp => false,
        Node::Not | Node::And => matches!(parent, Node::And | Node::Or),
        Node::Or => parent == Node::Or,
    }
}

/// The name PostgreSQL prints for a cast's target type and its kind, for
/// the types whose casts print plainly.
fn cast_target(t: &ast::DataType) -> Option<(&'static str, Kind)> {
    use ast::DataType as D;
    Some(match t {
        D::Int(None) | D::Integer(None) | D::Int4(None) => ("integer", Kind::Int),
        D::BigInt(None) | D::Int8(None) => ("bigint", Kind::Int),
        D::SmallInt(None) | D::Int2(None) => ("smallint", Kind::Int),
        D::Text => ("text", Kind::Text),
        D::Numeric(ast::ExactNumberInfo::None) | D::Decimal(ast::ExactNumberInfo::None) => ("numeric", Kind::Numeric),
        _ => return None,
    })
}

fn strip_nested(e: &E) -> &E {
    match e {
        E::Nested(inner) => strip_nested(inner),
        other => other,
    }
}

/// The column a select-list item names when it is a plain column
/// reference (PostgreSQL prints `AS name` only when the output name differs).
fn column_name(e: &E) -> Option<String> {
    match e {
        E::Identifier(i) => Some(ident(i)),
        E::CompoundIdentifier(p) => p.last().map(ident),
        E::Nested(inner) => column_name(inner),
        _ => None,
    }
}

fn wildcard_has_options(o: &ast::WildcardAdditionalOptions) -> bool {
    o.opt_ilike.is_some()
        || o.opt_exclude.is_some()
        || o.opt_except.is_some()
        || o.opt_replace.is_some()
        || o.opt_rename.is_some()
}

fn ident(i: &ast::Ident) -> String {
    if i.quote_style.is_some() { i.value.clone() } else { i.value.to_lowercase() }
}

fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

fn literal(v: &ast::ValueWithSpan) -> Result<Printed> {
    let simple = |text: String, kind: Kind| Printed { text, kind, node: Node::Simple };
    match &v.value {
        ast::Value::Number(n, _) if n.bytes().all(|b| b.is_ascii_digit()) => {
            if n.parse::<i32>().is_ok() {
                Ok(simple(n.clone(), Kind::Int))
            } else {
                Err(refuse("an integer literal beyond int4"))
            }
        }
        ast::Value::Number(n, _) if n.bytes().all(|b| b.is_ascii_digit() || b == b'.') && n.contains('.') => {
            Ok(simple(n.clone(), Kind::Numeric))
        }
        ast::Value::SingleQuotedString(s) => Ok(simple(format!("'{}'", s.replace('\'', "''")), Kind::Unknown)),
        ast::Value::Boolean(b) => Ok(simple(b.to_string(), Kind::Bool)),
        ast::Value::Null => Ok(simple("NULL".into(), Kind::Unknown)),
        _ => Err(refuse(format!("the literal {v}"))),
    }
}
