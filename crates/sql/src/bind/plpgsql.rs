//! CREATE FUNCTION ... LANGUAGE plpgsql and calls of such functions.
//!
//! The body is parsed at CREATE (`crate::plpgsql`: 42601 for a syntax
//! error, 0A000 for what pgtier does not run) and bound there once as a
//! dry run, so that what PostgreSQL's compiler rejects at CREATE (an
//! unknown assignment target, EXIT outside a loop, a misplaced label) and
//! every 0A000 refusal come at CREATE. At each binding of a statement
//! that calls it, the body is bound again into a `PlProgram` (one parse
//! and bind per statement, kept with the prepared statement): variables
//! are slots read as parameters `$k` (arguments first, then FOUND, then
//! the declared variables), so every expression and SQL statement is
//! pgtier's own, bound with the variables as typed parameters. A
//! statement that fails to bind (a table that does not exist yet) is
//! kept as its error and raised when it is reached, as PostgreSQL plans
//! a statement when it first runs it.

use std::sync::Arc;

use pgtier_engine::{DataType, TableSchema};
use sqlparser::ast;

use super::user_function::BodyScope;
use super::{Binder, Ty, map_type};
use crate::catalog::triggers::TriggerDoc;
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::plan::{
    BoundTrigger, OutputColumn, PlBlock, PlExpr, PlHandler, PlInto, PlLevel, PlLoop, PlProgram, PlRef, PlReturn,
    PlStmt, Plan, SelectPlan, TableTriggers,
};
use crate::plpgsql::{self as pl, Stmt};

/// What a trigger function's program is bound for: the table's columns
/// (NEW and OLD have its row type).
#[derive(Clone, Debug)]
pub(crate) struct TriggerRow {
    pub columns: Vec<(String, DataType)>,
}

/// The slots of a program while it is bound.
struct Slots {
    names: Vec<String>,
    types: Vec<DataType>,
    /// CONSTANT slots: assigning one is refused.
    constants: Vec<usize>,
    /// RECORD variables in scope: name, and whether a statement assigns it.
    records: Vec<(String, bool)>,
    /// Enclosing labels, innermost last, and whether each is a loop's.
    labels: Vec<(Option<String>, bool)>,
    /// What PostgreSQL's compiler rejects at CREATE, first one found.
    fatal: Option<SqlError>,
    depth: usize,
    ret: Option<DataType>,
    trigger: Option<(Vec<usize>, Vec<usize>)>,
}

impl Slots {
    fn push(&mut self, name: &str, ty: DataType) -> usize {
        self.names.push(name.to_owned());
        self.types.push(ty);
        self.names.len() - 1
    }

    fn lookup(&self, name: &str) -> Option<usize> {
        self.names.iter().rposition(|n| !n.is_empty() && n == name)
    }

    /// Hides the slots from `mark` on (their block ended).
    fn hide_from(&mut self, mark: usize) {
        for n in &mut self.names[mark..] {
            n.clear();
        }
    }

    fn fatal(&mut self, e: SqlError) {
        if self.fatal.is_none() {
            self.fatal = Some(e);
        }
    }
}

fn unsupported(what: &str) -> SqlError {
    SqlError::unsupported(format!("{what} in PL/pgSQL"))
}

/// `SELECT <text>` parsed: the query an expression is.
fn parse_expr(text: &str) -> Result<ast::Query> {
    let mut stmts = crate::parse::parse_sql(&format!("SELECT {text}"))?;
    match (stmts.pop(), stmts.is_empty()) {
        (Some(ast::Statement::Query(q)), true) => Ok(*q),
        _ => Err(SqlError::syntax(format!("syntax error at or near \"{text}\""))),
    }
}

/// A declared type; None for RECORD.
fn decl_type(text: &str) -> Result<Option<DataType>> {
    if text.trim().eq_ignore_ascii_case("record") {
        return Ok(None);
    }
    let q = parse_expr(&format!("CAST(NULL AS {text})"))?;
    if let ast::SetExpr::Select(s) = q.body.as_ref()
        && let Some(ast::SelectItem::UnnamedExpr(ast::Expr::Cast { data_type, .. })) = s.projection.first()
    {
        let lower = text.trim().to_lowercase();
        if ["trigger", "void", "anyelement", "anyarray", "cursor", "refcursor"].contains(&lower.as_str()) {
            return Err(unsupported(&format!("variables of type {lower}")));
        }
        return map_type(data_type).map(Some);
    }
    Err(SqlError::syntax(format!("syntax error at or near \"{text}\"")))
}

/// A query plan that is one expression evaluated without reading
/// anything (no FROM, aggregate, window or clause).
fn is_plain(p: &SelectPlan) -> bool {
    p.levels.is_empty()
        && p.agg.is_none()
        && p.windows.is_empty()
        && p.final_filters.is_empty()
        && p.limit.is_none()
        && p.offset.is_none()
        && !p.distinct
        && p.distinct_on.is_empty()
        && p.order_by.is_empty()
        && p.projection.len() == 1
}

/// A string literal's value (`'x'`, `E'x'`, `$$x$$`), None for anything else.
fn literal_text(text: &str) -> Option<String> {
    let q = parse_expr(text).ok()?;
    if let ast::SetExpr::Select(s) = q.body.as_ref()
        && let Some(ast::SelectItem::UnnamedExpr(ast::Expr::Value(v))) = s.projection.first()
    {
        return match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::EscapedStringLiteral(s) => Some(s.clone()),
            ast::Value::DollarQuotedString(d) => Some(d.value.clone()),
            _ => None,
        };
    }
    None
}

impl<'c> Binder<'c> {
    /// CREATE FUNCTION ... LANGUAGE plpgsql: the checks PostgreSQL's
    /// validator makes, and pgtier's refusals, now.
    pub(super) fn check_plpgsql(
        &mut self,
        name: &str,
        body: &str,
        args: &[DataType],
        arg_names: &[String],
        ret: Option<DataType>,
    ) -> Result<()> {
        let block = pl::parse_body(body)?;
        let trigger = ret.is_none().then(|| TriggerRow { columns: Vec::new() });
        let (_, fatal) = self.bind_program(name, &block, args, arg_names, ret, trigger.as_ref())?;
        match fatal {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The program of a PL/pgSQL function for a statement that calls it.
    pub(crate) fn plpgsql_program(
        &mut self,
        name: &str,
        body: &str,
        args: &[DataType],
        arg_names: &[String],
        ret: Option<DataType>,
        trigger: Option<&TriggerRow>,
    ) -> Result<PlProgram> {
        let block = pl::parse_body(body)?;
        let (program, fatal) = self.bind_program(name, &block, args, arg_names, ret, trigger)?;
        match fatal {
            Some(e) => Err(e),
            None => Ok(program),
        }
    }

    fn bind_program(
        &mut self,
        name: &str,
        block: &pl::Block,
        args: &[DataType],
        arg_names: &[String],
        ret: Option<DataType>,
        trigger: Option<&TriggerRow>,
    ) -> Result<(PlProgram, Option<SqlError>)> {
        let depth = self.function.as_ref().map_or(0, |s| s.depth) + 1;
        // A trigger whose function writes its own table (or functions
        // calling each other) binds programs inside programs.
        if depth > super::user_function::BODY_DEPTH_MAX {
            return Err(SqlError::new("54001", "stack depth limit exceeded").with_hint(
                "Increase the configuration parameter \"max_stack_depth\" (currently 2048kB), after ensuring the \
                 platform's stack depth limit is adequate.",
            ));
        }
        let mut s = Slots {
            names: arg_names.to_vec(),
            types: args.to_vec(),
            constants: Vec::new(),
            records: Vec::new(),
            labels: Vec::new(),
            fatal: None,
            depth,
            ret,
            trigger: None,
        };
        let found = s.push("found", DataType::Bool);
        if let Some(t) = trigger {
            let new: Vec<usize> = t.columns.iter().map(|(c, ty)| s.push(&format!("new.{c}"), *ty)).collect();
            let old: Vec<usize> = t.columns.iter().map(|(c, ty)| s.push(&format!("old.{c}"), *ty)).collect();
            for v in ["tg_op", "tg_name", "tg_when", "tg_level", "tg_table_name", "tg_table_schema", "tg_relname"] {
                s.push(v, DataType::Text);
            }
            s.push("tg_nargs", DataType::Int4);
            s.trigger = Some((new, old));
        }
        // The function's name labels its outermost block.
        s.labels.push((Some(name.to_owned()), false));
        let body = self.pl_block(&mut s, block);
        let fatal = s.fatal.take().or_else(|| first_refusal(&body));
        let program = PlProgram { name: name.to_owned(), slots: s.types, found, body, ret };
        Ok((program, fatal))
    }

    /// A binder for one expression or statement of the program.
    fn pl_binder(&self, s: &Slots) -> Binder<'c> {
        Binder {
            params: s.types.iter().map(|t| Some(*t)).collect(),
            perm_view: self.perm_view.clone(),
            function: Some(BodyScope { names: s.names.clone(), depth: s.depth, plpgsql: true }),
            ..Binder::new(self.catalog, self.rows, self.path, self.view_path)
        }
    }

    /// Takes what a program's binder found into the calling statement's.
    fn absorb(&mut self, b: Binder<'_>) {
        for d in b.deps {
            if !self.deps.iter().any(|x| Arc::ptr_eq(x, &d)) {
                self.deps.push(d);
            }
        }
        self.indexes.extend(b.indexes);
        self.perms.extend(b.perms);
        self.touched.merge(b.touched);
        self.volatile_calls |= b.volatile_calls;
    }

    /// An expression, converted to `target` by an assignment cast.
    fn pl_expr(&mut self, s: &mut Slots, text: &str, target: Option<DataType>) -> Result<(PlExpr, Ty)> {
        // A syntax error is PostgreSQL's at CREATE.
        let q = parse_expr(text).inspect_err(|e| s.fatal(e.clone()))?;
        let mut b = self.pl_binder(s);
        let bound = b.query(&q, None).and_then(|mut plan| {
            if plan.visible != 1 {
                return Err(SqlError::syntax(format!("query \"SELECT {text}\" returned {} columns", plan.visible)));
            }
            let mut ty = plan.columns[0].ty;
            if let Some(to) = target
                && ty != Some(to)
            {
                let e = std::mem::replace(&mut plan.projection[0], Expr::Const(pgtier_engine::Value::Null));
                plan.projection[0] = b.assign(e, ty, to, "")?;
                ty = Some(to);
            }
            Ok((plan, ty))
        });
        self.absorb(b);
        let (mut plan, ty) = bound?;
        if is_plain(&plan) {
            return Ok((PlExpr::Expr(plan.projection.swap_remove(0)), ty));
        }
        Ok((PlExpr::Query(Box::new(plan)), ty))
    }

    fn pl_cond(&mut self, s: &mut Slots, text: &str) -> Result<PlExpr> {
        Ok(self.pl_expr(s, text, Some(DataType::Bool))?.0)
    }

    fn pl_block(&mut self, s: &mut Slots, b: &pl::Block) -> PlBlock {
        let mark = s.names.len();
        let records = s.records.len();
        s.labels.push((b.label.clone(), false));
        let mut init = Vec::new();
        let mut failed = None;
        for d in &b.decls {
            match self.pl_decl(s, d) {
                Ok(i) => init.push(i),
                Err(e) => {
                    if e.sqlstate == "0A000" || e.sqlstate == "42601" || e.sqlstate == "42704" {
                        s.fatal(e.clone());
                    }
                    failed.get_or_insert(e);
                }
            }
        }
        let mut body = self.pl_stmts(s, &b.body);
        if let Some(e) = failed {
            if let Some(r) = refusal_in(&body) {
                s.fatal(r);
            }
            body = vec![PlStmt::Error(e)];
        }
        let mut handlers = Vec::new();
        let mut error_slots = None;
        if !b.handlers.is_empty() {
            let hmark = s.names.len();
            let state = s.push("sqlstate", DataType::Text);
            let errm = s.push("sqlerrm", DataType::Text);
            error_slots = Some((state, errm));
            for h in &b.handlers {
                let mut codes = Vec::new();
                for c in &h.conditions {
                    match pl::condition_codes(c) {
                        Ok(cs) => codes.extend(cs),
                        Err(e) => s.fatal(e),
                    }
                }
                let body = self.pl_stmts(s, &h.body);
                handlers.push(PlHandler { codes, body });
            }
            s.hide_from(hmark);
        }
        s.labels.pop();
        s.hide_from(mark);
        s.records.truncate(records);
        PlBlock { label: b.label.clone(), init, body, handlers, error_slots }
    }

    fn pl_decl(&mut self, s: &mut Slots, d: &pl::Decl) -> Result<(usize, Option<PlExpr>, bool, String)> {
        let Some(ty) = decl_type(&d.ty)? else {
            if d.default.is_some() {
                return Err(unsupported("a RECORD variable with a default"));
            }
            s.records.push((d.name.clone(), false));
            // A record's slot holds nothing; its fields get slots when assigned.
            let slot = s.push("", DataType::Bool);
            return Ok((slot, None, false, d.name.clone()));
        };
        let default = match &d.default {
            Some(text) => Some(self.pl_expr(s, text, Some(ty))?.0),
            None => None,
        };
        let slot = s.push(&d.name, ty);
        if d.constant {
            s.constants.push(slot);
        }
        Ok((slot, default, d.not_null, d.name.clone()))
    }

    fn pl_stmts(&mut self, s: &mut Slots, stmts: &[Stmt]) -> Vec<PlStmt> {
        stmts
            .iter()
            .map(|st| match self.pl_stmt(s, st) {
                Ok(p) => p,
                Err(e) => PlStmt::Error(e),
            })
            .collect()
    }

    fn pl_stmt(&mut self, s: &mut Slots, st: &Stmt) -> Result<PlStmt> {
        Ok(match st {
            Stmt::Assign { target, expr } => self.pl_assign(s, target, expr)?,
            Stmt::If { arms, otherwise } => {
                let mut bound = Vec::new();
                for (c, body) in arms {
                    let cond = self.pl_cond(s, c);
                    let body = self.pl_stmts(s, body);
                    bound.push((cond?, body));
                }
                let otherwise = otherwise.as_ref().map(|o| self.pl_stmts(s, o)).unwrap_or_default();
                PlStmt::If { arms: bound, otherwise }
            }
            Stmt::Case { subject, arms, otherwise } => {
                self.pl_case(s, subject.as_deref(), arms, otherwise.as_deref())?
            }
            Stmt::Loop { label, kind, body } => self.pl_loop(s, label.as_ref(), kind, body)?,
            Stmt::Exit { cont, label, when } => self.pl_exit(s, *cont, label.as_ref(), when.as_deref())?,
            Stmt::Return(e) => self.pl_return(s, e.as_deref())?,
            Stmt::Raise(r) => self.pl_raise(s, r)?,
            Stmt::Sql { text, into } => self.pl_sql(s, text, into.as_ref(), false)?,
            Stmt::Perform(text) => self.pl_sql(s, text, None, true)?,
            Stmt::GetDiagnostics(items) => {
                let mut targets = Vec::new();
                for (var, _) in items {
                    match s.lookup(var) {
                        Some(k) => targets.push((k, s.types[k])),
                        None => {
                            let e = SqlError::syntax(format!("\"{var}\" is not a known variable"));
                            s.fatal(e.clone());
                            return Err(e);
                        }
                    }
                }
                PlStmt::RowCount(targets)
            }
            Stmt::Block(b) => PlStmt::Block(self.pl_block(s, b)),
            Stmt::Null => PlStmt::Null,
        })
    }

    fn pl_assign(&mut self, s: &mut Slots, target: &str, expr: &str) -> Result<PlStmt> {
        let Some(slot) = s.lookup(target) else {
            let e = if s.records.iter().any(|(r, _)| r == target || target.starts_with(&format!("{r}."))) {
                unsupported("assignment to a RECORD variable or its fields")
            } else if s.trigger.is_some() && (target.starts_with("new.") || target.starts_with("old.")) {
                SqlError::new("42703", format!("record \"{}\" has no field \"{}\"", &target[..3], &target[4..]))
            } else {
                SqlError::syntax(format!("\"{target}\" is not a known variable"))
            };
            if e.sqlstate != "42703" {
                s.fatal(e.clone());
            }
            return Err(e);
        };
        if s.constants.contains(&slot) {
            let e = SqlError::new("22005", format!("variable \"{target}\" is declared CONSTANT"));
            s.fatal(e.clone());
            return Err(e);
        }
        let ty = s.types[slot];
        let (e, _) = self.pl_expr(s, expr, Some(ty))?;
        Ok(PlStmt::Assign { slot, expr: e, not_null: None })
    }

    /// CASE as IF: the subject is evaluated once into a hidden slot, each
    /// arm is `$k IN (list)`; no arm and no ELSE is PostgreSQL's 20000.
    fn pl_case(
        &mut self,
        s: &mut Slots,
        subject: Option<&str>,
        arms: &[(String, Vec<Stmt>)],
        otherwise: Option<&[Stmt]>,
    ) -> Result<PlStmt> {
        let mut pre = Vec::new();
        let subject_slot = match subject {
            Some(text) => {
                let (e, ty) = self.pl_expr(s, text, None)?;
                let slot = s.push("", ty.unwrap_or(DataType::Text));
                pre.push(PlStmt::Assign { slot, expr: e, not_null: None });
                Some(slot)
            }
            None => None,
        };
        let mut bound = Vec::new();
        for (w, body) in arms {
            let cond = match subject_slot {
                Some(k) => format!("${} IN ({w})", k + 1),
                None => w.clone(),
            };
            let cond = self.pl_cond(s, &cond);
            let body = self.pl_stmts(s, body);
            bound.push((cond?, body));
        }
        let otherwise = match otherwise {
            Some(o) => self.pl_stmts(s, o),
            None => vec![PlStmt::Error(
                SqlError::new("20000", "case not found").with_hint("CASE statement is missing ELSE part."),
            )],
        };
        pre.push(PlStmt::If { arms: bound, otherwise });
        Ok(PlStmt::Block(PlBlock { label: None, init: Vec::new(), body: pre, handlers: Vec::new(), error_slots: None }))
    }

    fn pl_loop(&mut self, s: &mut Slots, label: Option<&String>, kind: &pl::LoopKind, body: &[Stmt]) -> Result<PlStmt> {
        let mark = s.names.len();
        let kind = match kind {
            pl::LoopKind::Plain => PlLoop::Plain,
            pl::LoopKind::While(c) => PlLoop::While(self.pl_cond(s, c)?),
            pl::LoopKind::Range { var, reverse, lo, hi, step } => {
                let lo = self.pl_expr(s, lo, Some(DataType::Int4))?.0;
                let hi = self.pl_expr(s, hi, Some(DataType::Int4))?.0;
                let step = match step {
                    Some(t) => Some(self.pl_expr(s, t, Some(DataType::Int4))?.0),
                    None => None,
                };
                let slot = s.push(var, DataType::Int4);
                PlLoop::Range { slot, reverse: *reverse, lo, hi, step }
            }
            pl::LoopKind::Query { targets, query } => {
                let mut stmts = crate::parse::parse_sql(query).map_err(|e| {
                    let e = SqlError::from(e);
                    s.fatal(e.clone());
                    e
                })?;
                let q = match (stmts.pop(), stmts.is_empty()) {
                    (Some(ast::Statement::Query(q)), true) => q,
                    _ => return Err(SqlError::syntax(format!("syntax error at or near \"{query}\""))),
                };
                let mut b = self.pl_binder(s);
                let plan = b.query(&q, None);
                self.absorb(b);
                let plan = plan?;
                let columns = plan.columns[..plan.visible].to_vec();
                let assign = self.pl_targets(s, targets, &columns)?;
                PlLoop::Query { query: Box::new(plan), assign }
            }
        };
        s.labels.push((label.cloned(), true));
        let body = self.pl_stmts(s, body);
        s.labels.pop();
        if matches!(kind, PlLoop::Range { .. }) {
            s.hide_from(mark);
        }
        Ok(PlStmt::Loop { label: label.cloned(), kind, body })
    }

    /// The assignments of a row of `columns` to INTO / FOR targets: one
    /// RECORD (its fields become slots named `rec.column`), or variables
    /// in column order (missing columns leave NULL, as PostgreSQL).
    fn pl_targets(
        &mut self,
        s: &mut Slots,
        targets: &[String],
        columns: &[OutputColumn],
    ) -> Result<Vec<(usize, Expr)>> {
        if let [t] = targets
            && let Some(r) = s.records.iter_mut().find(|(n, _)| n == t)
        {
            if r.1 {
                let e = unsupported("a RECORD variable assigned by more than one statement");
                s.fatal(e.clone());
                return Err(e);
            }
            r.1 = true;
            let mut out = Vec::new();
            for (i, c) in columns.iter().enumerate() {
                let slot = s.push(&format!("{t}.{}", c.name), c.ty.unwrap_or(DataType::Text));
                out.push((slot, Expr::Column(i)));
            }
            return Ok(out);
        }
        let mut out = Vec::new();
        let mut b = self.pl_binder(s);
        for (i, t) in targets.iter().enumerate() {
            let Some(slot) = s.lookup(t) else {
                let e = if s.records.iter().any(|(r, _)| r == t) {
                    unsupported("a RECORD variable among several INTO targets")
                } else {
                    SqlError::syntax(format!("\"{t}\" is not a known variable"))
                };
                s.fatal(e.clone());
                return Err(e);
            };
            if s.constants.contains(&slot) {
                let e = SqlError::new("22005", format!("variable \"{t}\" is declared CONSTANT"));
                s.fatal(e.clone());
                return Err(e);
            }
            let e = match columns.get(i) {
                Some(c) => b.assign(Expr::Column(i), c.ty, s.types[slot], "")?,
                None => Expr::Const(pgtier_engine::Value::Null),
            };
            out.push((slot, e));
        }
        self.absorb(b);
        Ok(out)
    }

    fn pl_exit(&mut self, s: &mut Slots, cont: bool, label: Option<&String>, when: Option<&str>) -> Result<PlStmt> {
        let word = if cont { "CONTINUE" } else { "EXIT" };
        let ok = match label {
            None => s.labels.iter().any(|(_, is_loop)| *is_loop),
            Some(l) => s.labels.iter().any(|(n, is_loop)| n.as_ref() == Some(l) && (*is_loop || !cont)),
        };
        if !ok {
            let e = match label {
                None if cont => SqlError::syntax("CONTINUE cannot be used outside a loop"),
                None => SqlError::syntax("EXIT cannot be used outside a loop, unless it has a label"),
                Some(l) if cont && s.labels.iter().any(|(n, _)| n.as_ref() == Some(l)) => {
                    SqlError::syntax(format!("block label \"{l}\" cannot be used in CONTINUE"))
                }
                Some(l) => SqlError::syntax(format!(
                    "there is no label \"{l}\" attached to any block or loop enclosing this statement"
                )),
            };
            let _ = word;
            s.fatal(e.clone());
            return Err(e);
        }
        let when = match when {
            Some(w) => Some(self.pl_cond(s, w)?),
            None => None,
        };
        Ok(PlStmt::Exit { cont, label: label.cloned(), when })
    }

    fn pl_return(&mut self, s: &mut Slots, e: Option<&str>) -> Result<PlStmt> {
        if let Some((new, old)) = &s.trigger {
            let row = match e.map(|t| t.trim().to_lowercase()) {
                Some(t) if t == "new" => Some(new.clone()),
                Some(t) if t == "old" => Some(old.clone()),
                Some(t) if t == "null" => None,
                _ => {
                    let e = unsupported("RETURN of anything but NEW, OLD or NULL in a trigger function");
                    s.fatal(e.clone());
                    return Err(e);
                }
            };
            return Ok(PlStmt::Return(PlReturn::Row(row)));
        }
        let Some(text) = e else {
            let e = SqlError::syntax("missing expression at or near \";\"");
            s.fatal(e.clone());
            return Err(e);
        };
        let (e, _) = self.pl_expr(s, text, s.ret)?;
        Ok(PlStmt::Return(PlReturn::Value(Some(e))))
    }

    fn pl_raise(&mut self, s: &mut Slots, r: &pl::Raise) -> Result<PlStmt> {
        let level = match r.level.as_str() {
            "debug" | "log" => PlLevel::Quiet,
            "info" => PlLevel::Info,
            "notice" => PlLevel::Notice,
            "warning" => PlLevel::Warning,
            _ => PlLevel::Exception,
        };
        let mut code = if level == PlLevel::Exception { "P0001" } else { "00000" };
        let mut format = match &r.format {
            Some(f) => {
                Some(literal_text(f).ok_or_else(|| SqlError::syntax(format!("syntax error at or near \"{f}\"")))?)
            }
            None => None,
        };
        if let Some(c) = &r.condition {
            match pl::condition_codes(c) {
                Ok(codes) => code = codes[0],
                Err(e) => {
                    s.fatal(e.clone());
                    return Err(e);
                }
            }
            format = Some(c.strip_prefix("sqlstate:").unwrap_or(c).to_owned());
        }
        let mut args = Vec::new();
        for a in &r.args {
            args.push(self.pl_expr(s, a, None)?.0);
        }
        let mut options = Vec::new();
        for (opt, text) in &r.options {
            let fatal = match opt.as_str() {
                "message" if format.is_some() => Some(SqlError::syntax("RAISE option already specified: MESSAGE")),
                "errcode" => match literal_text(text).map(|c| {
                    if c.len() == 5 && c.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) {
                        pl::condition_codes(&format!("sqlstate:{c}"))
                    } else {
                        pl::condition_codes(&c)
                    }
                }) {
                    Some(Ok(codes)) => {
                        code = codes[0];
                        None
                    }
                    Some(Err(e)) => Some(e),
                    None => Some(unsupported("an ERRCODE that is not a literal")),
                },
                "message" | "detail" | "hint" => {
                    options.push((opt.clone(), self.pl_expr(s, text, Some(DataType::Text))?.0));
                    None
                }
                "column" | "constraint" | "datatype" | "table" | "schema" => {
                    Some(unsupported(&format!("RAISE ... USING {}", opt.to_uppercase())))
                }
                other => Some(SqlError::syntax(format!("unrecognized RAISE statement option \"{other}\""))),
            };
            if let Some(e) = fatal {
                s.fatal(e.clone());
                return Err(e);
            }
        }
        if format.is_none() && !options.iter().any(|(o, _)| o == "message") && level == PlLevel::Exception {
            format = Some(pl::errcodes::ERRCODES.iter().find(|(c, _)| *c == code).map_or(code, |(_, n)| n).to_owned());
        }
        Ok(PlStmt::Raise { level, code, format, args, options })
    }

    /// An embedded SQL statement (or PERFORM's query, `perform`).
    fn pl_sql(&mut self, s: &mut Slots, text: &str, into: Option<&pl::Into>, perform: bool) -> Result<PlStmt> {
        let mut stmts = match crate::parse::parse_sql(text) {
            Ok(st) => st,
            Err(e) => {
                let e = SqlError::from(e);
                s.fatal(e.clone());
                return Err(e);
            }
        };
        let stmt = match (stmts.pop(), stmts.is_empty()) {
            (Some(st), true) => st,
            _ => return Err(SqlError::syntax(format!("syntax error at or near \"{text}\""))),
        };
        let what = match &stmt {
            ast::Statement::Query(_) => "SELECT",
            ast::Statement::Insert(_) => "INSERT",
            ast::Statement::Update { .. } => "UPDATE",
            ast::Statement::Delete(_) => "DELETE",
            _ => return Err(unsupported(&format!("the statement {text}"))),
        };
        let mut b = self.pl_binder(s);
        let plan = b.statement(&stmt);
        let modifying = !b.modifying.is_empty();
        self.absorb(b);
        let plan = plan?;
        if modifying {
            return Err(unsupported("a data-modifying WITH query"));
        }
        let columns = match &plan {
            Plan::Select(p) => p.columns[..p.visible].to_vec(),
            Plan::Insert(i) => i.columns.clone(),
            Plan::Update(u) => u.columns.clone(),
            Plan::Delete(d) => d.columns.clone(),
            Plan::Partitioned(ps) => match ps.first() {
                Some(Plan::Update(u)) => u.columns.clone(),
                Some(Plan::Delete(d)) => d.columns.clone(),
                _ => Vec::new(),
            },
            _ => return Err(unsupported(&format!("the statement {text}"))),
        };
        let into = match into {
            Some(i) => Some(PlInto { strict: i.strict, assign: self.pl_targets(s, &i.targets, &columns)? }),
            None if !perform && !columns.is_empty() => {
                return Err(SqlError::syntax("query has no destination for result data")
                    .with_hint("If you want to discard the results of a SELECT, use PERFORM instead."));
            }
            None => None,
        };
        Ok(PlStmt::Sql { plan: Box::new(plan), into, what })
    }
}

/// The first 0A000 a statement of the block was bound to: pgtier refuses
/// it at CREATE, never at a later call.
fn first_refusal(b: &PlBlock) -> Option<SqlError> {
    refusal_in(&b.body).or_else(|| b.handlers.iter().find_map(|h| refusal_in(&h.body)))
}

fn refusal_in(stmts: &[PlStmt]) -> Option<SqlError> {
    stmts.iter().find_map(|st| match st {
        PlStmt::Error(e) if e.sqlstate == "0A000" => Some(e.clone()),
        PlStmt::If { arms, otherwise } => {
            arms.iter().find_map(|(_, body)| refusal_in(body)).or_else(|| refusal_in(otherwise))
        }
        PlStmt::Loop { body, .. } => refusal_in(body),
        PlStmt::Block(b) => first_refusal(b),
        _ => None,
    })
}

/// Which write fires triggers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Event {
    Insert,
    /// With the columns its SET list assigns (UPDATE OF).
    Update,
    Delete,
}

/// A cached table's annotation starts so (crates/cache persist.rs).
fn is_cached(t: &TableSchema) -> bool {
    t.annotation.as_deref().is_some_and(|a| a.starts_with("{\"pgtier_cache_group\""))
}

fn cached_refusal(table: &str) -> SqlError {
    SqlError::unsupported(format!("triggers on the cached table \"{table}\"")).with_hint(
        "Writes to a cached table are applied to PostgreSQL by the cache group, where PostgreSQL's own triggers on \
         the source table fire; a pgtier trigger would fire a second time there. Create the trigger in PostgreSQL.",
    )
}

impl Binder<'_> {
    /// The triggers a write of `event` on `table` fires, bound; `set` are
    /// the columns an UPDATE assigns.
    pub(super) fn table_triggers(
        &mut self,
        table: &Arc<TableSchema>,
        event: Event,
        set: &[usize],
    ) -> Result<TableTriggers> {
        let mut out = TableTriggers::default();
        let all = crate::catalog::triggers::triggers_of(self.catalog, &table.name);
        for t in all {
            if !self.deps.iter().any(|d| Arc::ptr_eq(d, &t.schema)) {
                self.deps.push(Arc::clone(&t.schema));
            }
            let fires = match event {
                Event::Insert => t.doc.insert,
                Event::Delete => t.doc.delete,
                Event::Update => {
                    t.doc.update
                        && (t.doc.update_of.is_empty()
                            || t.doc.update_of.iter().any(|c| table.column_index(c).is_some_and(|i| set.contains(&i))))
                }
            };
            if !fires || !t.doc.enabled {
                continue;
            }
            let Some(f) = crate::catalog::functions::functions_named(self.catalog, &t.doc.function)
                .into_iter()
                .find(|f| f.doc.trigger && f.args.is_empty())
            else {
                return Err(SqlError::undefined_function(&format!("{}()", t.doc.function)));
            };
            if !self.deps.iter().any(|d| Arc::ptr_eq(d, &f.table)) {
                self.deps.push(Arc::clone(&f.table));
            }
            let visible: Vec<usize> = (0..table.columns.len()).filter(|&c| !table.columns[c].is_hidden()).collect();
            let row = TriggerRow {
                columns: visible.iter().map(|&c| (table.columns[c].name.clone(), table.columns[c].ty)).collect(),
            };
            let program = self.plpgsql_program(&f.name, &f.doc.body, &[], &[], None, Some(&row))?;
            let (schema_name, table_name) = crate::names::split(&table.name);
            let bound = BoundTrigger {
                name: t.name.clone(),
                program: PlRef(Arc::new(program)),
                columns: visible,
                table_name: table_name.to_owned(),
                schema_name: schema_name.to_owned(),
            };
            if t.doc.before { out.before.push(bound) } else { out.after.push(bound) }
        }
        Ok(out)
    }

    /// A DELETE or UPDATE of `table` whose foreign keys' actions would
    /// change rows of a table with triggers (the engine does them without
    /// firing any): 0A000.
    pub(super) fn refuse_cascaded_triggers(&self, table: &TableSchema) -> Result<()> {
        for fk in self.catalog.referencing(table.id) {
            if matches!(fk.on_delete, pgtier_engine::FkAction::NoAction) {
                continue;
            }
            if let Some(child) = self.catalog.table(fk.child)
                && !crate::catalog::triggers::triggers_of(self.catalog, &child.name).is_empty()
            {
                return Err(SqlError::unsupported(format!(
                    "a foreign key action of \"{}\" changing rows of \"{}\", which has triggers",
                    fk.name, child.name
                )));
            }
        }
        Ok(())
    }

    /// CREATE [OR REPLACE] TRIGGER.
    pub(super) fn create_trigger(&mut self, c: &ast::CreateTrigger) -> Result<Plan> {
        let refused = [
            (c.or_alter, "CREATE OR ALTER TRIGGER"),
            (c.temporary, "CREATE TEMPORARY TRIGGER"),
            (c.is_constraint, "constraint triggers"),
            (c.referenced_table_name.is_some(), "constraint triggers (FROM table)"),
            (!c.referencing.is_empty(), "transition tables (REFERENCING)"),
            (c.statements.is_some(), "trigger bodies"),
            (c.characteristics.is_some(), "deferrable triggers"),
            (c.condition.is_some(), "CREATE TRIGGER ... WHEN"),
        ];
        if let Some((_, what)) = refused.iter().find(|(on, _)| *on) {
            return Err(SqlError::unsupported(*what));
        }
        let before = match c.period {
            Some(ast::TriggerPeriod::Before) => true,
            Some(ast::TriggerPeriod::After) => false,
            Some(ast::TriggerPeriod::InsteadOf) => return Err(SqlError::unsupported("INSTEAD OF triggers")),
            _ => return Err(SqlError::syntax("syntax error at or near \"ON\"")),
        };
        let row_level = matches!(
            c.trigger_object,
            Some(
                ast::TriggerObjectKind::ForEach(ast::TriggerObject::Row)
                    | ast::TriggerObjectKind::For(ast::TriggerObject::Row)
            )
        );
        if !row_level {
            return Err(SqlError::unsupported("FOR EACH STATEMENT triggers"));
        }
        let name = match super::parts(&c.name)?.as_slice() {
            [n] => n.clone(),
            _ => return Err(SqlError::syntax("trigger name cannot be schema-qualified")),
        };
        let table = self.relation(&c.table_name)?;
        if is_cached(&table) {
            return Err(cached_refusal(&table.name));
        }
        let short = crate::names::split(&table.name).1;
        if crate::catalog::is_view(&table) {
            return Err(SqlError::new("42809", format!("\"{short}\" is a view"))
                .with_detail("Views cannot have row-level BEFORE or AFTER triggers."));
        }
        if table.sequence.is_some() {
            return Err(SqlError::new("42809", format!("\"{short}\" is not a table or view")));
        }
        if crate::names::is_temp_schema(crate::names::split(&table.name).0) {
            // The session's end drops its temporary tables without their triggers.
            return Err(SqlError::unsupported("triggers on temporary tables"));
        }
        if crate::catalog::partitions::is_partitioned(&table) {
            return Err(SqlError::unsupported("triggers on partitioned tables"));
        }
        let (mut insert, mut update, mut delete) = (false, false, false);
        let mut update_of = Vec::new();
        for e in &c.events {
            match e {
                ast::TriggerEvent::Insert => insert = true,
                ast::TriggerEvent::Delete => delete = true,
                ast::TriggerEvent::Update(cols) => {
                    update = true;
                    for col in cols {
                        let n = super::ident(col);
                        if table.column_index(&n).is_none() {
                            return Err(SqlError::new(
                                "42703",
                                format!(
                                    "column \"{n}\" of relation \"{}\" does not exist",
                                    crate::names::split(&table.name).1
                                ),
                            ));
                        }
                        update_of.push(n);
                    }
                }
                ast::TriggerEvent::Truncate => return Err(SqlError::unsupported("TRUNCATE triggers")),
            }
        }
        let Some(body) = &c.exec_body else { return Err(SqlError::syntax("syntax error at end of input")) };
        if body.func_desc.args.as_ref().is_some_and(|a| !a.is_empty()) {
            return Err(SqlError::unsupported("trigger arguments (TG_ARGV)"));
        }
        let function = match super::parts(&body.func_desc.name)?.as_slice() {
            [n] => n.clone(),
            [s, n] if s == "public" => n.clone(),
            _ => return Err(SqlError::unsupported("trigger functions outside schema public")),
        };
        let candidates = crate::catalog::functions::functions_named(self.catalog, &function);
        let Some(f) = candidates.iter().find(|f| f.args.is_empty()) else {
            return Err(SqlError::undefined_function(&format!("{function}()")));
        };
        if !f.doc.trigger {
            return Err(SqlError::new("42P17", format!("function {function} must return type trigger")));
        }
        let doc = TriggerDoc { function, before, insert, update, delete, update_of, enabled: true };
        Ok(Plan::CreateTrigger { table: table.name.clone(), name, doc, replace: c.or_replace })
    }

    /// ALTER TABLE ... ENABLE / DISABLE TRIGGER name.
    pub(super) fn enable_trigger(&mut self, table: &TableSchema, name: &str, enable: bool) -> Result<Plan> {
        if name == "all" || name == "user" {
            return Err(SqlError::unsupported(format!("ENABLE / DISABLE TRIGGER {}", name.to_uppercase())));
        }
        let Some(t) =
            crate::catalog::triggers::triggers_of(self.catalog, &table.name).into_iter().find(|t| t.name == name)
        else {
            let short = crate::names::split(&table.name).1;
            return Err(SqlError::new("42704", format!("trigger \"{name}\" for table \"{short}\" does not exist")));
        };
        let doc = TriggerDoc { enabled: enable, ..t.doc };
        Ok(Plan::AlterTrigger { table: table.name.clone(), name: name.to_owned(), doc })
    }

    pub(super) fn drop_trigger(&mut self, d: &ast::DropTrigger) -> Result<Plan> {
        if matches!(d.option, Some(ast::ReferentialAction::Cascade)) {
            return Err(SqlError::unsupported("DROP TRIGGER ... CASCADE"));
        }
        let name = match super::parts(&d.trigger_name)?.as_slice() {
            [n] => n.clone(),
            _ => return Err(SqlError::syntax("trigger name cannot be schema-qualified")),
        };
        let Some(table_name) = &d.table_name else { return Err(SqlError::syntax("syntax error at end of input")) };
        let table = match self.relation(table_name) {
            Ok(t) => t.name.clone(),
            Err(e) if d.if_exists && e.sqlstate == "42P01" => {
                return Ok(Plan::DropTrigger { table: String::new(), name, if_exists: true });
            }
            Err(e) => return Err(e),
        };
        Ok(Plan::DropTrigger { table, name, if_exists: d.if_exists })
    }
}
