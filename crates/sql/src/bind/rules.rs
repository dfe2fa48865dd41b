//! CREATE RULE / DROP RULE, and the rewrite PostgreSQL's rewriter
//! (rewriteHandler.c) makes of an INSERT / UPDATE / DELETE on a relation
//! with rules for it, once per statement.
//!
//! The rows the original statement would write are a query of its own
//! (`new_old`): its FROM items, its WHERE, and per column of the relation
//! the old value and the new one (assigned or inserted, cast to the
//! column's type; an INSERT's missing column its default). A rule action
//! reads them as the derived table `"*rule*"` (columns `"old.c"`,
//! `"new.c"`), joined into its FROM / USING (as PostgreSQL adds the
//! original's range table to the action's), filtered by the rule's WHERE;
//! NEW.c / OLD.c in the action's text name those columns. The statements
//! run in PostgreSQL's order: for INSERT the original first, for UPDATE
//! and DELETE the actions first; an unconditional INSTEAD rule drops the
//! original. What this does not reproduce exactly (conditional INSTEAD
//! rules, NOTIFY actions, RETURNING other than `*`, typmod'd columns
//! written, ...) is refused with 0A000.

use sqlparser::ast;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::Binder;
use crate::catalog::rules::{Rule, RuleDoc, RuleEvent, rules_of};
use crate::error::{Result, SqlError};
use crate::plan::Plan;

/// The derived table of the original's rows in a rewritten action.
const RULE_REL: &str = "\"*rule*\"";

/// The statement whose relation's rules are applied.
#[derive(Clone, Copy)]
pub(super) enum Original<'a> {
    Insert(&'a ast::Insert),
    Update(&'a ast::Update),
    Delete(&'a ast::Delete),
}

impl Original<'_> {
    fn event(self) -> RuleEvent {
        match self {
            Original::Insert(_) => RuleEvent::Insert,
            Original::Update(_) => RuleEvent::Update,
            Original::Delete(_) => RuleEvent::Delete,
        }
    }

    /// The relation written, as named, with the name its columns are qualified by.
    fn target(self) -> Option<(ast::ObjectName, Option<String>)> {
        let factor = match self {
            Original::Insert(i) => {
                let ast::TableObject::TableName(n) = &i.table else { return None };
                return Some((n.clone(), None));
            }
            Original::Update(u) => &u.table.relation,
            Original::Delete(d) => match &d.from {
                ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => &v.first()?.relation,
            },
        };
        let ast::TableFactor::Table { name, alias, .. } = factor else { return None };
        Some((name.clone(), alias.as_ref().map(|a| a.name.to_string())))
    }

    fn has_returning(self) -> bool {
        match self {
            Original::Insert(i) => i.returning.is_some(),
            Original::Update(u) => u.returning.is_some(),
            Original::Delete(d) => d.returning.is_some(),
        }
    }

    fn returning_is_star(self) -> bool {
        let r = match self {
            Original::Insert(i) => &i.returning,
            Original::Update(u) => &u.returning,
            Original::Delete(d) => &d.returning,
        };
        matches!(r.as_deref(), Some([ast::SelectItem::Wildcard(_)]))
    }

    fn statement(self) -> ast::Statement {
        match self {
            Original::Insert(i) => ast::Statement::Insert(i.clone()),
            Original::Update(u) => ast::Statement::Update(u.clone()),
            Original::Delete(d) => ast::Statement::Delete(d.clone()),
        }
    }
}

/// NEW / OLD as an action's text uses them.
#[derive(Default)]
struct Refs {
    new: bool,
    old: bool,
    star: bool,
}

/// `text` with NEW.c / OLD.c as columns of [`RULE_REL`], and what it named.
fn rename_refs(text: &str) -> Result<(String, Refs)> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, text).tokenize().map_err(|e| SqlError::syntax(e.to_string()))?;
    let mut refs = Refs::default();
    let mut out = String::new();
    let mut k = 0;
    while k < tokens.len() {
        let which = match &tokens[k] {
            Token::Word(w) if w.quote_style.is_none() && (k == 0 || tokens[k - 1] != Token::Period) => {
                let v = w.value.to_ascii_lowercase();
                (v == "new" || v == "old").then_some(v)
            }
            _ => None,
        };
        match (which, tokens.get(k + 1), tokens.get(k + 2)) {
            (Some(which), Some(Token::Period), Some(Token::Word(c))) => {
                let col = if c.quote_style.is_some() { c.value.clone() } else { c.value.to_lowercase() };
                if which == "new" {
                    refs.new = true;
                } else {
                    refs.old = true;
                }
                let column = crate::catalog::quote_ident(&format!("{which}.{col}"));
                out.push_str(&format!("{RULE_REL}.{column}"));
                k += 3;
            }
            (Some(which), Some(Token::Period), Some(Token::Mul)) => {
                refs.star = true;
                out.push_str(&which);
                k += 1;
            }
            _ => {
                out.push_str(&tokens[k].to_string());
                k += 1;
            }
        }
    }
    Ok((out, refs))
}

fn parse_one(text: &str) -> Result<ast::Statement> {
    let mut stmts = crate::parse::parse_sql(text).map_err(SqlError::from)?;
    match stmts.len() {
        1 => Ok(stmts.remove(0)),
        _ => Err(SqlError::new("XX000", "rule action is not one statement")),
    }
}

fn names_new_old(text: &str) -> Result<Refs> {
    rename_refs(text).map(|(_, r)| r)
}

/// The FROM item of [`RULE_REL`] over the query `sql`.
fn rule_from(sql: &str) -> Result<ast::TableWithJoins> {
    match parse_one(&format!("SELECT 1 FROM ({sql}) AS {RULE_REL}"))? {
        ast::Statement::Query(q) => match *q.body {
            ast::SetExpr::Select(s) => s.from.into_iter().next().ok_or_else(|| SqlError::new("XX000", "rule FROM")),
            _ => Err(SqlError::new("XX000", "rule FROM")),
        },
        _ => Err(SqlError::new("XX000", "rule FROM")),
    }
}

fn unsupported_rule(what: &str) -> SqlError {
    SqlError::unsupported(format!("rules: {what}"))
}

fn with_error(what: &str) -> SqlError {
    SqlError::new("0A000", format!("{what} rules are not supported for data-modifying statements in WITH"))
}

impl Binder<'_> {
    /// CREATE [OR REPLACE] RULE (dialect.rs's `parse_create_rule`).
    pub(super) fn create_rule(&mut self, c: &ast::CreateTrigger) -> Result<Plan> {
        let name = match super::parts(&c.name)?.as_slice() {
            [n] => n.clone(),
            _ => return Err(SqlError::syntax("rule name cannot be schema-qualified")),
        };
        if name == "_RETURN" {
            return Err(unsupported_rule("a rule named _RETURN"));
        }
        let table = self.relation(&c.table_name)?;
        if table.sequence.is_some() || crate::catalog::partitions::is_partitioned(&table) {
            return Err(unsupported_rule("a rule on a sequence or partitioned table"));
        }
        let event = match c.events.first() {
            Some(ast::TriggerEvent::Insert) => RuleEvent::Insert,
            Some(ast::TriggerEvent::Update(_)) => RuleEvent::Update,
            _ => RuleEvent::Delete,
        };
        let actions: Vec<ast::Statement> = c.statements.as_ref().map(|s| s.statements().clone()).unwrap_or_default();
        let mut texts = Vec::new();
        for a in &actions {
            self.check_action(a, event)?;
            texts.push(a.to_string());
        }
        let condition = c.condition.as_ref().map(ToString::to_string);
        if let Some(cond) = &condition {
            self.check_refs(&names_new_old(cond)?, event)?;
        }
        for a in texts.iter().filter(|a| !a.to_ascii_uppercase().starts_with("NOTIFY")) {
            self.validate_action(event, &table, &c.table_name, a, condition.as_deref())?;
        }
        let doc = RuleDoc {
            event,
            instead: matches!(c.period, Some(ast::TriggerPeriod::InsteadOf)),
            condition,
            actions: texts,
        };
        Ok(Plan::CreateRule { table: table.name.clone(), name, doc, replace: c.or_replace })
    }

    fn check_refs(&self, refs: &Refs, event: RuleEvent) -> Result<()> {
        if refs.old && event == RuleEvent::Insert {
            return Err(SqlError::new("42P17", "ON INSERT rule cannot use OLD"));
        }
        if refs.new && event == RuleEvent::Delete {
            return Err(SqlError::new("42P17", "ON DELETE rule cannot use NEW"));
        }
        if refs.star {
            return Err(unsupported_rule("NEW.* or OLD.* in a rule"));
        }
        Ok(())
    }

    /// An action PostgreSQL takes, with NEW / OLD where its event has them.
    fn check_action(&self, a: &ast::Statement, event: RuleEvent) -> Result<()> {
        let with = match a {
            ast::Statement::Insert(_) | ast::Statement::Update(_) | ast::Statement::Delete(_) => None,
            ast::Statement::NOTIFY { .. } => return Ok(()),
            ast::Statement::Query(q) => q.with.as_ref(),
            _ => return Err(unsupported_rule("this rule action")),
        };
        if let Some(with) = with {
            let refs = names_new_old(&with.to_string())?;
            if refs.old || refs.new {
                let which = if refs.old { "OLD" } else { "NEW" };
                return Err(SqlError::new("0A000", format!("cannot refer to {which} within WITH query")));
            }
        }
        self.check_refs(&names_new_old(&a.to_string())?, event)
    }

    /// Binds `action` over no rows of `table` as NEW and OLD: PostgreSQL
    /// reports an unknown relation or column at CREATE RULE, and what
    /// pgtier cannot bind is refused there rather than at each write.
    fn validate_action(
        &mut self,
        event: RuleEvent,
        table: &pgtier_engine::TableSchema,
        name: &ast::ObjectName,
        action: &str,
        condition: Option<&str>,
    ) -> Result<()> {
        let q = crate::catalog::quote_ident;
        let items: Vec<String> = crate::catalog::column_types(table)
            .iter()
            .flat_map(|(c, _)| ["old", "new"].map(|w| format!("r.{} AS {}", q(c), q(&format!("{w}.{c}")))))
            .collect();
        let sql = format!("SELECT {} FROM {name} AS r WHERE false", items.join(", "));
        let sql = match condition.map(rename_refs).transpose()? {
            Some((c, _)) => filtered(&sql, &c, table, event),
            None => sql,
        };
        let (text, refs) = rename_refs(action)?;
        let mut stmt = parse_one(&text)?;
        if refs.new || refs.old || condition.is_some() {
            attach(&mut stmt, &sql)?;
        }
        self.statement(&stmt).map(|_| ())
    }

    /// PostgreSQL 15's MERGE takes no relation with rules.
    pub(super) fn refuse_merge_rules(&self, table: &pgtier_engine::TableSchema) -> Result<()> {
        if rules_of(self.catalog, &table.name).is_empty() {
            return Ok(());
        }
        Err(SqlError::unsupported(format!("cannot execute MERGE on relation \"{}\"", crate::names::short(&table.name)))
            .with_detail("MERGE is not supported for relations with rules."))
    }

    /// DROP RULE [IF EXISTS] name ON table.
    pub(super) fn drop_rule(&mut self, d: &ast::DropTrigger) -> Result<Plan> {
        let name = match super::parts(&d.trigger_name)?.as_slice() {
            [n] => n.clone(),
            _ => return Err(SqlError::syntax("rule name cannot be schema-qualified")),
        };
        let Some(table_name) = &d.table_name else { return Err(SqlError::syntax("syntax error at end of input")) };
        let table = match self.relation(table_name) {
            Ok(t) => t.name.clone(),
            Err(e) if d.if_exists && e.sqlstate == "42P01" => {
                return Ok(Plan::DropRule { table: String::new(), name, if_exists: true });
            }
            Err(e) => return Err(e),
        };
        Ok(Plan::DropRule { table, name, if_exists: d.if_exists })
    }

    /// The plan of `orig` as its relation's rules rewrite it; None when
    /// it has none for its event (or they are applied already: it is the
    /// original statement of a rewrite).
    pub(super) fn apply_rules(&mut self, orig: Original<'_>) -> Result<Option<Plan>> {
        let Some((name, alias)) = orig.target() else { return Ok(None) };
        let in_cte = std::mem::replace(&mut self.modifying_cte, false);
        let Some(table) = self.relation(&name).ok() else { return Ok(None) };
        let event = orig.event();
        let all = rules_of(self.catalog, &table.name);
        if let Original::Insert(i) = orig
            && i.on.is_some()
            && all.iter().any(|r| r.doc.event != RuleEvent::Delete)
        {
            return Err(SqlError::unsupported(
                "INSERT with ON CONFLICT clause cannot be used with table that has INSERT or UPDATE rules",
            ));
        }
        let rules: Vec<Rule> = all.into_iter().filter(|r| r.doc.event == event).collect();
        if rules.is_empty() {
            return Ok(None);
        }
        if self.rules_skip.as_deref() == Some(table.name.as_str()) {
            self.rules_skip = None;
            return Ok(None);
        }
        if self.rule_stack.iter().any(|(t, e)| *t == table.name && *e == event) {
            return Err(SqlError::new(
                "42P17",
                format!("infinite recursion detected in rules for relation \"{}\"", crate::names::short(&table.name)),
            ));
        }
        let keep_original = !rules.iter().any(|r| r.doc.instead && r.doc.condition.is_none());
        let conditional_instead = rules.iter().any(|r| r.doc.instead && r.doc.condition.is_some());
        let actions: usize = rules.iter().map(|r| r.doc.actions.len()).sum();
        let products = actions + usize::from(keep_original);
        if in_cte {
            self.check_cte_rules(&rules, products, conditional_instead)?;
        } else if products > 1 && !self.ctes.is_empty() {
            return Err(SqlError::unsupported(
                "WITH cannot be used in a query that is rewritten by rules into multiple queries",
            ));
        }
        if conditional_instead {
            return Err(unsupported_rule("a conditional DO INSTEAD rule"));
        }
        if rules.iter().flat_map(|r| &r.doc.actions).any(|a| a.to_ascii_uppercase().starts_with("NOTIFY")) {
            return Err(unsupported_rule("NOTIFY in a rule action"));
        }
        let source = self.new_old(orig, &table, &name, alias.as_deref())?;
        let mut statements = Vec::new();
        for r in &rules {
            for a in &r.doc.actions {
                let action = self.rewrite_action(orig, &table, a, r, &source)?;
                statements.push((r.doc.instead, action));
            }
        }
        if orig.has_returning() && !keep_original && !statements.iter().any(|(_, s)| has_returning(s)) {
            let kind = event.keyword();
            return Err(SqlError::unsupported(format!(
                "cannot perform {kind} RETURNING on relation \"{}\"",
                crate::names::short(&table.name)
            ))
            .with_hint(format!("You need an unconditional ON {kind} DO INSTEAD rule with a RETURNING clause.")));
        }
        self.rules_plan(orig, &table.name, keep_original, in_cte, statements)
    }

    /// PostgreSQL's refusals of rules on a data-modifying WITH query's relation.
    fn check_cte_rules(&self, rules: &[Rule], products: usize, conditional_instead: bool) -> Result<()> {
        match products {
            0 => Err(with_error("DO INSTEAD NOTHING")),
            1 if rules.iter().flat_map(|r| &r.doc.actions).any(|a| a.to_ascii_uppercase().starts_with("NOTIFY")) => {
                Err(with_error("DO INSTEAD NOTIFY"))
            }
            1 => Ok(()),
            _ if conditional_instead => Err(with_error("conditional DO INSTEAD")),
            _ if rules.iter().any(|r| !r.doc.instead) => Err(with_error("DO ALSO")),
            _ => Err(with_error("multi-statement DO INSTEAD")),
        }
    }

    /// Binds the original (when kept) and the actions in PostgreSQL's order.
    fn rules_plan(
        &mut self,
        orig: Original<'_>,
        table: &str,
        keep_original: bool,
        in_cte: bool,
        actions: Vec<(bool, ast::Statement)>,
    ) -> Result<Option<Plan>> {
        let event = orig.event();
        let same_kind = |s: &ast::Statement| {
            matches!(
                (s, event),
                (ast::Statement::Insert(_), RuleEvent::Insert)
                    | (ast::Statement::Update(_), RuleEvent::Update)
                    | (ast::Statement::Delete(_), RuleEvent::Delete)
            )
        };
        let mut result = actions.iter().rposition(|(instead, s)| *instead && has_returning(s));
        if result.is_none() {
            result = actions.iter().rposition(|(instead, s)| *instead && same_kind(s));
        }
        if result.is_none() {
            result = actions.iter().rposition(|(_, s)| matches!(s, ast::Statement::Query(_)));
        }
        let mut plans = Vec::new();
        self.rule_stack.push((table.to_owned(), event));
        for (_, s) in &actions {
            let plan = self.statement(s);
            if plan.is_err() {
                self.rule_stack.pop();
            }
            plans.push(plan?);
        }
        self.rule_stack.pop();
        if keep_original {
            self.rules_skip = Some(table.to_owned());
            let plan = self.statement(&orig.statement());
            self.rules_skip = None;
            let at = if event == RuleEvent::Insert { 0 } else { plans.len() };
            plans.insert(at, plan?);
            result = Some(at);
        } else if in_cte && plans.len() == 1 {
            return match plans.remove(0) {
                p @ (Plan::Insert(_) | Plan::Update(_) | Plan::Delete(_)) => Ok(Some(p)),
                _ => Err(unsupported_rule("a SELECT action for a data-modifying WITH query")),
            };
        }
        let tag = match event {
            RuleEvent::Insert => "INSERT 0",
            RuleEvent::Update => "UPDATE",
            RuleEvent::Delete => "DELETE",
        };
        Ok(Some(Plan::Rules { plans, result, tag }))
    }

    /// The query of the original's rows: its FROM items and WHERE, per
    /// column of `table` the old and the new value.
    fn new_old(
        &mut self,
        orig: Original<'_>,
        table: &pgtier_engine::TableSchema,
        name: &ast::ObjectName,
        alias: Option<&str>,
    ) -> Result<NewOld> {
        let cols = crate::catalog::column_types(table);
        let q = crate::catalog::quote_ident;
        let reference = alias.map_or_else(|| name.to_string(), str::to_owned);
        let target = match alias {
            Some(a) => format!("{name} AS {a}"),
            None => name.to_string(),
        };
        let list = |items: &[ast::TableWithJoins]| items.iter().map(|t| format!(", {t}")).collect::<String>();
        let filter = |w: &Option<ast::Expr>| w.as_ref().map(|w| format!(" WHERE {w}")).unwrap_or_default();
        let mut items = Vec::new();
        let (from, always) = match orig {
            Original::Insert(i) => return self.inserted(i, table, &cols),
            Original::Update(u) => {
                if !u.table.joins.is_empty() {
                    return Err(unsupported_rule("UPDATE of a join"));
                }
                let mut set = std::collections::HashMap::new();
                for a in &u.assignments {
                    let ast::AssignmentTarget::ColumnName(c) = &a.target else {
                        return Err(unsupported_rule("a multiple-column assignment"));
                    };
                    let c = super::parts(c)?.pop().unwrap_or_default();
                    if a.value.to_string().eq_ignore_ascii_case("default") {
                        return Err(unsupported_rule("SET column = DEFAULT"));
                    }
                    set.insert(c, a.value.to_string());
                }
                for (c, ty) in &cols {
                    items.push(format!("{reference}.{} AS {}", q(c), q(&format!("old.{c}"))));
                    let new = match set.get(c) {
                        Some(v) => cast(v, *ty)?,
                        None => format!("{reference}.{}", q(c)),
                    };
                    items.push(format!("{new} AS {}", q(&format!("new.{c}"))));
                }
                let others = match &u.from {
                    Some(ast::UpdateTableFromKind::AfterSet(v) | ast::UpdateTableFromKind::BeforeSet(v)) => {
                        v.as_slice()
                    }
                    None => &[],
                };
                (
                    format!("{target}{}{}", list(others), filter(&u.selection)),
                    u.selection.is_some() || !others.is_empty(),
                )
            }
            Original::Delete(d) => {
                let (ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v)) = &d.from;
                if v.len() != 1 || !v[0].joins.is_empty() {
                    return Err(unsupported_rule("DELETE of several relations"));
                }
                for (c, _) in &cols {
                    items.push(format!("{reference}.{} AS {}", q(c), q(&format!("old.{c}"))));
                }
                let others = d.using.as_deref().unwrap_or(&[]);
                (
                    format!("{target}{}{}", list(others), filter(&d.selection)),
                    d.selection.is_some() || !others.is_empty(),
                )
            }
        };
        Ok(NewOld { sql: format!("SELECT {} FROM {from}", items.join(", ")), always })
    }

    /// An INSERT's rows: its source's columns by position, a column it
    /// does not name its default.
    fn inserted(
        &mut self,
        i: &ast::Insert,
        table: &pgtier_engine::TableSchema,
        cols: &[(String, pgtier_engine::DataType)],
    ) -> Result<NewOld> {
        if i.on.is_some() {
            return Err(SqlError::unsupported(
                "INSERT with ON CONFLICT clause cannot be used with table that has INSERT or UPDATE rules",
            ));
        }
        let named: Vec<String> = i
            .columns
            .iter()
            .map(|c| super::parts(c).map(|mut p| p.pop().unwrap_or_default()))
            .collect::<Result<_>>()?;
        let targets: Vec<usize> = if i.source.is_none() {
            Vec::new()
        } else if named.is_empty() {
            (0..cols.len()).collect()
        } else {
            let mut t = Vec::new();
            for n in &named {
                let k = cols.iter().position(|(c, _)| c == n).ok_or_else(|| {
                    SqlError::new(
                        "42703",
                        format!("column \"{n}\" of relation \"{}\" does not exist", crate::names::short(&table.name)),
                    )
                })?;
                t.push(k);
            }
            t
        };
        let visible: Vec<&pgtier_engine::Column> = table.columns.iter().filter(|c| !c.is_hidden()).collect();
        let q = crate::catalog::quote_ident;
        let mut items = Vec::new();
        for (k, (c, ty)) in cols.iter().enumerate() {
            let value = match targets.iter().position(|&t| t == k) {
                Some(p) => cast(&format!("\"*SELECT*\".\"{}\"", p + 1), *ty)?,
                None => match visible.get(k).and_then(|col| crate::catalog::column_default_text(self.catalog, col)) {
                    Some(d) => cast(&d, *ty)?,
                    None if visible.get(k).is_some_and(|col| crate::catalog::identity_kind(col).is_some()) => {
                        return Err(unsupported_rule("an identity column's default in NEW"));
                    }
                    None => format!("NULL::{}", ty.pg_name()),
                },
            };
            items.push(format!("{value} AS {}", q(&format!("new.{c}"))));
        }
        let source = match &i.source {
            None => "VALUES (NULL)".to_owned(),
            Some(s) => {
                if let ast::SetExpr::Values(v) = s.body.as_ref()
                    && v.rows.iter().flat_map(|r| &r.content).any(|e| e.to_string().eq_ignore_ascii_case("default"))
                {
                    return Err(unsupported_rule("DEFAULT in VALUES"));
                }
                s.to_string()
            }
        };
        let width = if i.source.is_none() { 1 } else { targets.len() };
        let names: Vec<String> = (1..=width).map(|k| format!("\"{k}\"")).collect();
        let sql = format!("SELECT {} FROM ({source}) AS \"*SELECT*\"({})", items.join(", "), names.join(", "));
        Ok(NewOld { sql, always: true })
    }

    /// One action of `rule` as it runs for `orig`: NEW / OLD read from
    /// the original's rows joined in, RETURNING the original's.
    fn rewrite_action(
        &mut self,
        orig: Original<'_>,
        table: &pgtier_engine::TableSchema,
        action: &str,
        rule: &Rule,
        source: &NewOld,
    ) -> Result<ast::Statement> {
        let (text, refs) = rename_refs(action)?;
        let condition = rule.doc.condition.as_deref().map(rename_refs).transpose()?.map(|(c, _)| c);
        let mut stmt = parse_one(&text)?;
        let modifying_with = self.ctes.iter().any(|c| c.modifying.is_some());
        if let ast::Statement::Insert(i) = &stmt
            && modifying_with
            && i.source.as_ref().is_some_and(|s| !matches!(s.body.as_ref(), ast::SetExpr::Values(_)))
        {
            return Err(SqlError::unsupported(
                "INSERT...SELECT rule actions are not supported for queries having data-modifying statements in WITH",
            ));
        }
        if refs.new || refs.old || condition.is_some() || source.always {
            let sql = match &condition {
                Some(c) => filtered(&source.sql, c, table, orig.event()),
                None => source.sql.clone(),
            };
            attach(&mut stmt, &sql)?;
        }
        let returning = match &mut stmt {
            ast::Statement::Insert(i) => Some(&mut i.returning),
            ast::Statement::Update(u) => Some(&mut u.returning),
            ast::Statement::Delete(d) => Some(&mut d.returning),
            _ => None,
        };
        if let Some(r) = returning {
            if !orig.has_returning() || !rule.doc.instead {
                *r = None;
            } else if let Some(items) = r.as_mut() {
                if !orig.returning_is_star() {
                    return Err(unsupported_rule("RETURNING other than * through a rule"));
                }
                self.relabel(items, table, &text)?;
            }
        }
        Ok(stmt)
    }

    /// An INSTEAD action's RETURNING items named as the rule's relation's
    /// columns (the original's `RETURNING *` reads them).
    fn relabel(&mut self, items: &mut [ast::SelectItem], table: &pgtier_engine::TableSchema, text: &str) -> Result<()> {
        let cols = crate::catalog::column_types(table);
        if let [ast::SelectItem::Wildcard(_)] = items {
            let n = match parse_one(text)? {
                ast::Statement::Insert(ast::Insert { table: ast::TableObject::TableName(n), .. }) => n,
                ast::Statement::Update(ast::Update {
                    table: ast::TableWithJoins { relation: ast::TableFactor::Table { name, .. }, .. },
                    ..
                }) => name,
                _ => return Err(unsupported_rule("RETURNING * of this action")),
            };
            let written = self.relation(&n)?;
            let same = crate::catalog::column_types(&written)
                .iter()
                .map(|(c, _)| c.clone())
                .eq(cols.iter().map(|(c, _)| c.clone()));
            return if same { Ok(()) } else { Err(unsupported_rule("RETURNING * naming other columns")) };
        }
        if items.len() != cols.len() {
            return Err(unsupported_rule("RETURNING of another width than the relation"));
        }
        for (item, (c, _)) in items.iter_mut().zip(&cols) {
            let expr = match item {
                ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
                _ => return Err(unsupported_rule("RETURNING t.* through a rule")),
            };
            *item = ast::SelectItem::ExprWithAlias { expr, alias: ast::Ident::with_quote('"', c.clone()) };
        }
        Ok(())
    }
}

/// The original's rows ([`Binder::new_old`]) and whether an action
/// naming neither NEW nor OLD still joins them (PostgreSQL keeps the
/// original's range table in the action when its quals read it).
struct NewOld {
    sql: String,
    always: bool,
}

/// `expr` as a value of a column of type `ty`.
fn cast(expr: &str, ty: pgtier_engine::DataType) -> Result<String> {
    let name = ty.pg_name();
    // An explicit cast to a length or precision truncates or rounds where
    // the assignment PostgreSQL makes fails.
    if name.contains('(') {
        return Err(unsupported_rule("writing a column of a type with a length or precision"));
    }
    Ok(format!("CAST(({expr}) AS {name})"))
}

/// `sql` joined into `stmt`'s FROM (UPDATE's FROM, DELETE's USING, an
/// INSERT's VALUES row or SELECT) as [`RULE_REL`].
fn attach(stmt: &mut ast::Statement, sql: &str) -> Result<()> {
    let item = rule_from(sql)?;
    match stmt {
        ast::Statement::Insert(i) => {
            let Some(source) = i.source.as_mut() else {
                return Err(unsupported_rule("INSERT ... DEFAULT VALUES action reading NEW or OLD"));
            };
            match source.body.as_mut() {
                ast::SetExpr::Values(v) if v.rows.len() == 1 => {
                    let row: Vec<String> = v.rows[0].content.iter().map(ToString::to_string).collect();
                    let q = match parse_one(&format!("SELECT {} FROM ({sql}) AS {RULE_REL}", row.join(", ")))? {
                        ast::Statement::Query(q) => q,
                        _ => return Err(SqlError::new("XX000", "rule VALUES")),
                    };
                    *source = q;
                }
                ast::SetExpr::Select(s) => s.from.push(item),
                _ => return Err(unsupported_rule("this INSERT action")),
            }
        }
        ast::Statement::Update(u) => match &mut u.from {
            None => u.from = Some(ast::UpdateTableFromKind::AfterSet(vec![item])),
            Some(ast::UpdateTableFromKind::AfterSet(v) | ast::UpdateTableFromKind::BeforeSet(v)) => v.push(item),
        },
        ast::Statement::Delete(d) => d.using.get_or_insert_with(Vec::new).push(item),
        ast::Statement::Query(q) => match q.body.as_mut() {
            ast::SetExpr::Select(s) => s.from.push(item),
            _ => return Err(unsupported_rule("this SELECT action")),
        },
        _ => return Err(unsupported_rule("this rule action")),
    }
    Ok(())
}

fn has_returning(s: &ast::Statement) -> bool {
    match s {
        ast::Statement::Insert(i) => i.returning.is_some(),
        ast::Statement::Update(u) => u.returning.is_some(),
        ast::Statement::Delete(d) => d.returning.is_some(),
        _ => false,
    }
}

/// The original's rows `sql` where the rule's condition `cond` holds. An
/// unqualified column there is NEW's in an INSERT rule, OLD's in a DELETE
/// rule, and either (ambiguous) in an UPDATE rule, as PostgreSQL puts
/// those in the condition's namespace.
fn filtered(sql: &str, cond: &str, table: &pgtier_engine::TableSchema, event: RuleEvent) -> String {
    let q = crate::catalog::quote_ident;
    let sides: &[&str] = match event {
        RuleEvent::Insert => &["new"],
        RuleEvent::Delete => &["old"],
        RuleEvent::Update => &["old", "new"],
    };
    let bare: String = crate::catalog::column_types(table)
        .iter()
        .flat_map(|(c, _)| sides.iter().map(move |w| format!(", {RULE_REL}.{} AS {}", q(&format!("{w}.{c}")), q(c))))
        .collect();
    format!("SELECT * FROM (SELECT {RULE_REL}.*{bare} FROM ({sql}) AS {RULE_REL}) AS {RULE_REL} WHERE {cond}")
}
