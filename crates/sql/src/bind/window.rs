//! Window function calls, the WINDOW clause and frame clauses.
//!
//! A named window is resolved on the syntax tree, as PostgreSQL's
//! transformWindowDefinitions copies clauses: `OVER w` is w's definition,
//! `OVER (w ORDER BY ...)` / `OVER (w ROWS ...)` copy w's PARTITION BY
//! (and its ORDER BY when they give none) and bring their own frame; w must
//! then have none. A WINDOW clause entry may name only the entries before
//! it. Each call then binds its resolved specification on its own, so two
//! calls over one window evaluate its expressions twice (they read the
//! row, so the values agree).

use pgtier_engine::DataType;
use sqlparser::ast;

use super::aggregate::aggregate_named;
use super::{Binder, ExprCtx, Scope, Ty, ident};
use crate::error::{Result, SqlError};
use crate::expr::Expr;
use crate::parse_window::window_name_parts;
use crate::plan::{AggCall, FrameBound, FrameExclude, FrameUnits, RangeOffset, WindowCall, WindowFrame, WindowFunc};
use crate::value;

/// A window specification with its reference to another resolved.
#[derive(Clone, Debug)]
pub(crate) struct WindowDef {
    partition_by: Vec<ast::Expr>,
    order_by: Vec<ast::OrderByExpr>,
    /// The frame clause as written; None without one (PostgreSQL's
    /// default frame, and a window OVER (w ...) may copy).
    frame: Option<ast::WindowFrame>,
    exclude: FrameExclude,
}

/// An entry of the query's WINDOW clause.
#[derive(Clone, Debug)]
pub(crate) struct NamedWindow {
    name: String,
    def: WindowDef,
    /// Named by a call (directly or as the window an OVER (w ...) copies).
    used: bool,
}

fn windowing_error(message: String) -> SqlError {
    SqlError::new("42P20", message)
}

impl Binder<'_> {
    /// The WINDOW clause's entries, in order, each resolved against those
    /// before it (checked whether or not a call uses them, as PostgreSQL does).
    pub(super) fn named_windows(&self, defs: &[ast::NamedWindowDefinition]) -> Result<Vec<NamedWindow>> {
        let mut out: Vec<NamedWindow> = Vec::with_capacity(defs.len());
        for ast::NamedWindowDefinition(name, expr) in defs {
            let name = ident(name);
            if out.iter().any(|w| w.name == name) {
                return Err(windowing_error(format!("window \"{name}\" is already defined")));
            }
            let ast::NamedWindowExpr::WindowSpec(spec) = expr else {
                return Err(SqlError::syntax(format!("syntax error at or near \"{expr}\"")));
            };
            let def = resolve_spec(spec, &out, true)?;
            out.push(NamedWindow { name, def, used: false });
        }
        Ok(out)
    }

    fn over_def(&mut self, over: &ast::WindowType) -> Result<WindowDef> {
        let (def, named) = match over {
            ast::WindowType::NamedWindow(n) => {
                let name = ident(n);
                let w = self.named_windows.iter().find(|w| w.name == name).ok_or_else(|| missing_window(&name))?;
                (w.def.clone(), Some(name))
            }
            ast::WindowType::WindowSpec(spec) => (resolve_spec(spec, &self.named_windows, false)?, spec_refname(spec)),
        };
        if let Some(w) = named.and_then(|n| self.named_windows.iter_mut().find(|w| w.name == n)) {
            w.used = true;
        }
        Ok(def)
    }

    /// Binds the WINDOW clause entries no call named, as PostgreSQL
    /// transforms every entry: their errors, and their aggregates, which
    /// make the query an aggregated one. Their expressions are returned
    /// for the check against GROUP BY; nothing evaluates them.
    pub(super) fn unused_windows(&mut self, scope: &Scope<'_>, ctx: &mut ExprCtx) -> Result<Vec<Expr>> {
        let unused: Vec<WindowDef> = self.named_windows.iter().filter(|w| !w.used).map(|w| w.def.clone()).collect();
        let mut exprs = Vec::new();
        for def in &unused {
            let saved = ctx.windows.take();
            let bound = self.window_def(def, scope, ctx);
            ctx.windows = saved;
            let (partition, order, _) = bound?;
            exprs.extend(partition.into_iter().chain(order.into_iter().map(|(e, _, _)| e)));
        }
        Ok(exprs)
    }

    /// `func(...) OVER (...)`: the rank-like functions, lag/lead, ntile,
    /// first/last/nth_value, or an aggregate over the frame.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn window_function(
        &mut self,
        over: &ast::WindowType,
        name: &str,
        args: &[ast::Expr],
        star: bool,
        distinct: bool,
        filter: Option<Expr>,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        if ctx.in_agg {
            return Err(SqlError::new("42803", "aggregate function calls cannot contain window function calls"));
        }
        if ctx.windows.is_none() {
            let clause = match ctx.clause {
                "" => "this context",
                c if c.starts_with("window ") => "window definitions",
                c => c,
            };
            return Err(windowing_error(format!("window functions are not allowed in {clause}")));
        }
        let def = self.over_def(over)?;
        if distinct {
            return Err(SqlError::unsupported("DISTINCT is not implemented for window functions"));
        }
        // The call's own pieces may hold aggregates but no window function.
        let saved = ctx.windows.take();
        let bound = self.window_call(&def, name, args, star, filter, scope, ctx);
        ctx.windows = saved;
        let (call, ty) = bound?;
        let windows = ctx.windows.as_mut().ok_or_else(|| SqlError::new("XX000", "window context lost"))?;
        windows.push(call);
        Ok((Expr::WindowRef(windows.len() - 1), ty))
    }

    #[allow(clippy::too_many_arguments)]
    fn window_call(
        &mut self,
        def: &WindowDef,
        name: &str,
        args: &[ast::Expr],
        star: bool,
        filter: Option<Expr>,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(WindowCall, Ty)> {
        let mut value_type: Ty = None;
        let func = match (name, aggregate_named(name, star)) {
            (_, Some(a)) => {
                WindowFunc::Agg(AggCall { filter, ..self.agg_call(a, name, args, false, true, scope, ctx)? })
            }
            ("row_number" | "rank" | "dense_rank" | "percent_rank" | "cume_dist", None) if args.is_empty() && !star => {
                match name {
                    "row_number" => WindowFunc::RowNumber,
                    "rank" => WindowFunc::Rank,
                    "dense_rank" => WindowFunc::DenseRank,
                    "percent_rank" => WindowFunc::PercentRank,
                    _ => WindowFunc::CumeDist,
                }
            }
            ("ntile", None) if args.len() == 1 => {
                let (n, t) = self.expr(&args[0], scope, ctx)?;
                WindowFunc::Ntile(self.coerce(n, t, DataType::Int4, name)?)
            }
            ("lag" | "lead", None) if (1..=3).contains(&args.len()) => {
                let (mut value, mut vt) = self.expr(&args[0], scope, ctx)?;
                let offset = match args.get(1) {
                    Some(a) => {
                        let (o, t) = self.expr(a, scope, ctx)?;
                        Some(self.coerce(o, t, DataType::Int4, name)?)
                    }
                    None => None,
                };
                let default = match args.get(2) {
                    Some(a) => {
                        // lag(anycompatible, integer, anycompatible): value and
                        // default take their common type (lag(int, 1, 0.7) is numeric).
                        let (d, t) = self.expr(a, scope, ctx)?;
                        let common = super::coerce::common_type(&[vt, t], name)?;
                        value = self.result_cast(value, vt, common)?;
                        vt = common;
                        Some(self.result_cast(d, t, common)?)
                    }
                    None => None,
                };
                value_type = vt;
                WindowFunc::Shift { value, offset, default, lead: name == "lead" }
            }
            ("first_value" | "last_value", None) if args.len() == 1 => {
                let (value, vt) = self.expr(&args[0], scope, ctx)?;
                value_type = vt;
                if name == "first_value" { WindowFunc::FirstValue(value) } else { WindowFunc::LastValue(value) }
            }
            ("nth_value", None) if args.len() == 2 => {
                let (value, vt) = self.expr(&args[0], scope, ctx)?;
                value_type = vt;
                let (n, t) = self.expr(&args[1], scope, ctx)?;
                // nth_value(anyelement, integer): no implicit cast from bigint.
                if t.is_some_and(|t| !value::is_int4_implicit(t)) {
                    return Err(SqlError::undefined_function(&format!("{name}(...)")));
                }
                WindowFunc::NthValue(value, self.coerce(n, t, DataType::Int4, name)?)
            }
            (
                "row_number" | "rank" | "dense_rank" | "percent_rank" | "cume_dist" | "ntile" | "lag" | "lead"
                | "first_value" | "last_value" | "nth_value",
                None,
            ) => {
                return Err(SqlError::undefined_function(&format!("{name}(...)")));
            }
            // A function pgtier has that is neither: PostgreSQL's 42809.
            (_, None) if crate::expr::registry::lookup(name).is_some() || set_returning(name) => {
                return Err(SqlError::new(
                    "42809",
                    format!("OVER specified, but {name} is not a window function nor an aggregate function"),
                ));
            }
            (_, None) => return Err(SqlError::unsupported(format!("window function {name}()"))),
        };
        let (partition, order, frame) = self.window_def(def, scope, ctx)?;
        let ty = match &func {
            WindowFunc::Agg(agg) => Some(agg.ty),
            WindowFunc::PercentRank | WindowFunc::CumeDist => Some(DataType::Float8),
            WindowFunc::Ntile(_) => Some(DataType::Int4),
            WindowFunc::Shift { .. }
            | WindowFunc::FirstValue(_)
            | WindowFunc::LastValue(_)
            | WindowFunc::NthValue(..) => value_type,
            WindowFunc::RowNumber | WindowFunc::Rank | WindowFunc::DenseRank => Some(DataType::Int8),
        };
        Ok((WindowCall { func, partition, order, frame }, ty))
    }

    /// A window's PARTITION BY, ORDER BY and frame, bound (its keys may
    /// hold aggregates, not window functions: the caller took them away).
    #[allow(clippy::type_complexity)]
    fn window_def(
        &mut self,
        def: &WindowDef,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Vec<Expr>, Vec<(Expr, bool, bool)>, WindowFrame)> {
        let clause = std::mem::replace(&mut ctx.clause, "window definitions");
        let keys = self.window_keys(def, scope, ctx);
        ctx.clause = clause;
        let (partition, order, order_types) = keys?;
        let frame = self.frame(def, &order, &order_types, scope)?;
        Ok((partition, order, frame))
    }

    #[allow(clippy::type_complexity)]
    fn window_keys(
        &mut self,
        def: &WindowDef,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Vec<Expr>, Vec<(Expr, bool, bool)>, Vec<Ty>)> {
        let mut partition = Vec::with_capacity(def.partition_by.len());
        for e in &def.partition_by {
            partition.push(self.expr(e, scope, ctx)?.0);
        }
        let (mut order, mut types) = (Vec::with_capacity(def.order_by.len()), Vec::with_capacity(def.order_by.len()));
        for item in &def.order_by {
            let desc = item.options.asc == Some(false);
            let (e, t) = self.expr(&item.expr, scope, ctx)?;
            order.push((e, desc, item.options.nulls_first.unwrap_or(desc)));
            types.push(t);
        }
        Ok((partition, order, types))
    }

    /// The frame with its offsets bound (transformFrameOffset): ROWS and
    /// GROUPS offsets are bigints; a RANGE offset needs exactly one ORDER BY
    /// column and takes the type its in_range function does.
    fn frame(
        &mut self,
        def: &WindowDef,
        order: &[(Expr, bool, bool)],
        order_types: &[Ty],
        scope: &Scope<'_>,
    ) -> Result<WindowFrame> {
        let Some(f) = &def.frame else { return Ok(WindowFrame::default_frame()) };
        let units = match f.units {
            ast::WindowFrameUnits::Rows => FrameUnits::Rows,
            ast::WindowFrameUnits::Range => FrameUnits::Range,
            ast::WindowFrameUnits::Groups => FrameUnits::Groups,
        };
        let end = f.end_bound.clone().unwrap_or(ast::WindowFrameBound::CurrentRow);
        let has_offset = [&f.start_bound, &end].iter().any(|b| {
            matches!(b, ast::WindowFrameBound::Preceding(Some(_)) | ast::WindowFrameBound::Following(Some(_)))
        });
        let mut range = None;
        if units == FrameUnits::Range && has_offset {
            if order.len() != 1 {
                return Err(windowing_error(
                    "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column".into(),
                ));
            }
            range = Some(order_types[0]);
        }
        if units == FrameUnits::Groups && order.is_empty() {
            return Err(windowing_error("GROUPS mode requires an ORDER BY clause".into()));
        }
        let mut kind = None;
        let mut bound = |b: &mut Self, ast_bound: &ast::WindowFrameBound| -> Result<FrameBound> {
            Ok(match ast_bound {
                ast::WindowFrameBound::CurrentRow => FrameBound::CurrentRow,
                ast::WindowFrameBound::Preceding(None) => FrameBound::UnboundedPreceding,
                ast::WindowFrameBound::Following(None) => FrameBound::UnboundedFollowing,
                ast::WindowFrameBound::Preceding(Some(e)) => {
                    FrameBound::Preceding(b.frame_offset(units, range, &mut kind, e, scope)?)
                }
                ast::WindowFrameBound::Following(Some(e)) => {
                    FrameBound::Following(b.frame_offset(units, range, &mut kind, e, scope)?)
                }
            })
        };
        let start = bound(self, &f.start_bound)?;
        let end = bound(self, &end)?;
        Ok(WindowFrame { units, start, end, exclude: def.exclude, range: kind })
    }

    fn frame_offset(
        &mut self,
        units: FrameUnits,
        column: Option<Ty>,
        kind: &mut Option<RangeOffset>,
        e: &ast::Expr,
        scope: &Scope<'_>,
    ) -> Result<Expr> {
        let (what, clause) = match units {
            FrameUnits::Rows => ("ROWS", "window ROWS"),
            FrameUnits::Range => ("RANGE", "window RANGE"),
            FrameUnits::Groups => ("GROUPS", "window GROUPS"),
        };
        let (x, t) = self.expr(e, scope, &mut ExprCtx::plain(clause))?;
        let x = match column {
            None => self.coerce(x, t, DataType::Int8, what)?,
            Some(column) => {
                let (k, to) = range_offset(column, t)?;
                *kind = Some(k);
                self.coerce(x, t, to, what)?
            }
        };
        if super::expr::has_vars(&x) {
            return Err(SqlError::new("42P10", format!("argument of {what} must not contain variables")));
        }
        Ok(x)
    }
}

/// The window an `OVER (w ...)` names, if any.
fn spec_refname(spec: &ast::WindowSpec) -> Option<String> {
    let i = spec.window_name.as_ref()?;
    match window_name_parts(&i.value) {
        (name, Some(_)) => name.map(str::to_owned),
        (_, None) => Some(ident(i)),
    }
}

fn missing_window(name: &str) -> SqlError {
    SqlError::new("42704", format!("window \"{name}\" does not exist"))
}

/// `spec` with the window it names (among `earlier`) copied in.
fn resolve_spec(spec: &ast::WindowSpec, earlier: &[NamedWindow], in_window_clause: bool) -> Result<WindowDef> {
    let refname = spec_refname(spec);
    let exclusion = spec.window_name.as_ref().and_then(|i| window_name_parts(&i.value).1);
    let exclude = match exclusion {
        None | Some("no others") => FrameExclude::NoOthers,
        Some("current row") => FrameExclude::CurrentRow,
        Some("group") => FrameExclude::Group,
        Some(_) => FrameExclude::Ties,
    };
    match &spec.window_frame {
        Some(f) => check_frame_syntax(f)?,
        None if exclusion.is_some() => return Err(SqlError::syntax("syntax error at or near \"EXCLUDE\"")),
        None => {}
    }
    let Some(refname) = refname else {
        return Ok(WindowDef {
            partition_by: spec.partition_by.clone(),
            order_by: spec.order_by.clone(),
            frame: spec.window_frame.clone(),
            exclude,
        });
    };
    let base = &earlier.iter().find(|w| w.name == refname).ok_or_else(|| missing_window(&refname))?.def;
    if !spec.partition_by.is_empty() {
        return Err(windowing_error(format!("cannot override PARTITION BY clause of window \"{refname}\"")));
    }
    if !spec.order_by.is_empty() && !base.order_by.is_empty() {
        return Err(windowing_error(format!("cannot override ORDER BY clause of window \"{refname}\"")));
    }
    if base.frame.is_some() {
        let e = windowing_error(format!("cannot copy window \"{refname}\" because it has a frame clause"));
        return Err(if in_window_clause || !spec.order_by.is_empty() || spec.window_frame.is_some() {
            e
        } else {
            e.with_hint("Omit the parentheses in this OVER clause.")
        });
    }
    let order_by = if spec.order_by.is_empty() { base.order_by.clone() } else { spec.order_by.clone() };
    Ok(WindowDef { partition_by: base.partition_by.clone(), order_by, frame: spec.window_frame.clone(), exclude })
}

/// The frames PostgreSQL's grammar rejects (frame_extent).
fn check_frame_syntax(f: &ast::WindowFrame) -> Result<()> {
    use ast::WindowFrameBound::{CurrentRow, Following, Preceding};
    let message = match (&f.start_bound, &f.end_bound) {
        (Following(None), _) => "frame start cannot be UNBOUNDED FOLLOWING",
        (Following(Some(_)), None) => "frame starting from following row cannot end with current row",
        (_, Some(Preceding(None))) => "frame end cannot be UNBOUNDED PRECEDING",
        (CurrentRow, Some(Preceding(Some(_)))) => "frame starting from current row cannot have preceding rows",
        (Following(Some(_)), Some(Preceding(Some(_)) | CurrentRow)) => {
            "frame starting from following row cannot have preceding rows"
        }
        _ => return Ok(()),
    };
    Err(windowing_error(message.into()))
}

/// The in_range function PostgreSQL finds for an ORDER BY column of type
/// `column` and an offset of type `offset` (None: an untyped literal), and
/// the type the offset is coerced to.
fn range_offset(column: Ty, offset: Ty) -> Result<(RangeOffset, DataType)> {
    use DataType::{Date, Float4, Float8, Int2, Int4, Int8, Interval, Text, Time, Timestamp, TimestampTz, Varchar};
    let column_name = |c: Ty| match c {
        None | Some(Text | Varchar(_)) => "text",
        Some(t) => value::type_name(t),
    };
    let (kind, accepts): (RangeOffset, fn(DataType) -> bool) = match column {
        Some(Int2 | Int4 | Int8) => (RangeOffset::Integer, value::is_integer),
        Some(DataType::Numeric { .. }) => {
            (RangeOffset::Numeric, |t| value::is_integer(t) || matches!(t, DataType::Numeric { .. }))
        }
        Some(Float4 | Float8) => (RangeOffset::Float, |t| matches!(value::category(t), value::Category::Numeric)),
        Some(Date) => (RangeOffset::Date, |t| t == Interval),
        Some(Timestamp(_)) => (RangeOffset::Timestamp, |t| t == Interval),
        Some(TimestampTz(_)) => (RangeOffset::TimestampTz, |t| t == Interval),
        Some(Time(_)) => (RangeOffset::Time, |t| t == Interval),
        Some(DataType::TimeTz(_)) => (RangeOffset::TimeTz, |t| t == Interval),
        Some(Interval) => (RangeOffset::Interval, |t| t == Interval),
        other => {
            return Err(SqlError::new(
                "0A000",
                format!(
                    "RANGE with offset PRECEDING/FOLLOWING is not supported for column type {}",
                    column_name(other)
                ),
            ));
        }
    };
    let target = match (kind, offset, column) {
        // The in_range function whose offset type is the column's own is
        // the preferred one for an untyped literal.
        (RangeOffset::Integer, None, Some(c)) => c,
        (RangeOffset::Integer, Some(t), _) if accepts(t) => t,
        (RangeOffset::Numeric, None, _) => value::NUMERIC_ANY,
        (RangeOffset::Float, None, _) => Float8,
        (_, None, _) => Interval,
        (RangeOffset::Numeric, Some(t), _) if accepts(t) => value::NUMERIC_ANY,
        (RangeOffset::Float, Some(t), _) if accepts(t) => Float8,
        (_, Some(t), _) if accepts(t) => t,
        (_, Some(t), _) => {
            return Err(SqlError::new(
                "0A000",
                format!(
                    "RANGE with offset PRECEDING/FOLLOWING is not supported for column type {} and offset type {}",
                    column_name(column),
                    value::type_name(t)
                ),
            )
            .with_hint("Cast the offset value to an appropriate type."));
        }
    };
    Ok((kind, target))
}

/// A window function's reference becomes the column the executor appends
/// for it after the input row's `base` columns.
pub(super) fn resolve_window_refs(e: Expr, base: usize) -> Result<Expr> {
    match e {
        Expr::WindowRef(i) => Ok(Expr::Column(base + i)),
        other => other.map_children(&mut |c| resolve_window_refs(c, base)),
    }
}

/// The set-returning functions pgtier has (not in the scalar registry).
pub(super) fn set_returning(name: &str) -> bool {
    matches!(name, "generate_series" | "unnest" | "string_to_table" | "regexp_split_to_table" | "generate_subscripts")
        || super::json::json_srf(name).is_some()
}
