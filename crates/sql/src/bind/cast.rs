//! Casts to and from the SQL-layer-only types (`oid`, `reg*`, `name`,
//! `"char"`, arrays) and how reg* columns print.

use std::sync::Arc;

use pgtier_engine::{DataType, Value};
use sqlparser::ast;

use super::{Binder, Ty};
use crate::error::{Result, SqlError};
use crate::expr::{Expr, Func, SysFunc};
use crate::plan::{OutputColumn, SelectPlan};
use crate::value::types::{self, Elem, RegKind};
use crate::value::{self, Category, category};

/// What a `::type` names among the types only the SQL layer has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CastTarget {
    Oid,
    /// `name`, `"char"`: text here.
    Name,
    Char,
    Reg(RegKind),
    RegProc,
    Array(Elem),
    /// `tsvector` (true) or `tsquery` (false), carried as their text forms.
    TextSearch(bool),
}

impl Binder<'_> {
    /// `x::regclass` and friends.
    pub(super) fn reg_cast(&mut self, x: Expr, t: Ty, kind: RegKind) -> Result<(Expr, Ty)> {
        let ty = Some(kind.data_type());
        match (&x, t) {
            (Expr::Const(Value::Text(s)), None)
            | (Expr::Const(Value::Text(s)), Some(DataType::Text | DataType::Varchar(_)))
                if kind != RegKind::Role =>
            {
                let settings = std::collections::HashMap::new();
                let oid = crate::catalog::reg_lookup_in(self.catalog, self.path, &settings, kind, s)?;
                // The plan depends on the table it named: re-plan when it goes.
                if let Some(t) = crate::catalog::table_by_oid(self.catalog, oid)
                    && !self.deps.iter().any(|d| Arc::ptr_eq(d, t))
                {
                    self.deps.push(t.clone());
                }
                Ok((Expr::Const(Value::Int8(oid)), ty))
            }
            (Expr::Const(Value::Null), _) => Ok((x, ty)),
            (_, None) => {
                let x = self.coerce(x, None, DataType::Text, "::")?;
                Ok((Expr::Func(Func::Sys(SysFunc::RegIn(kind, false)), vec![x]), ty))
            }
            (_, Some(t)) if value::is_integer(t) || RegKind::of(t).is_some() => Ok((x, ty)),
            (_, Some(t)) if is_string(Some(t)) => Ok((Expr::Func(Func::Sys(SysFunc::RegIn(kind, false)), vec![x]), ty)),
            (_, Some(t)) => Err(cannot_cast(t, &format!("reg{:?}", kind).to_lowercase())),
        }
    }

    /// Casts involving the SQL-layer-only types; None for ordinary casts.
    pub(super) fn sys_cast(
        &mut self,
        x: Expr,
        t: Ty,
        target: Option<CastTarget>,
        plain: Option<DataType>,
    ) -> Result<Option<(Expr, Ty)>> {
        if let Some(target) = target {
            return Ok(Some(match target {
                CastTarget::Reg(kind) => self.reg_cast(x, t, kind)?,
                CastTarget::TextSearch(vector) => {
                    use crate::expr::textsearch;
                    textsearch::cast_from_text(textsearch::cast_def(), self, x, t, vector).map_err(|e| match t {
                        Some(from) if category(from) != Category::String => {
                            cannot_cast(from, if vector { "tsvector" } else { "tsquery" })
                        }
                        _ => e,
                    })?
                }
                CastTarget::Oid => match t {
                    Some(t) if RegKind::of(t).is_some() => (x, Some(types::OID)),
                    Some(t) if value::is_integer(t) => {
                        (Expr::Func(Func::Sys(SysFunc::OidFromInt(t == DataType::Int8)), vec![x]), Some(types::OID))
                    }
                    None => match x {
                        Expr::Const(Value::Text(s)) => {
                            (Expr::Const(Value::Int8(crate::expr::oid_in(&s)?)), Some(types::OID))
                        }
                        Expr::Const(Value::Null) => (x, Some(types::OID)),
                        x => (
                            Expr::Func(Func::Sys(SysFunc::OidIn), vec![self.coerce(x, None, DataType::Text, "::")?]),
                            Some(types::OID),
                        ),
                    },
                    Some(t) if is_string(Some(t)) => (Expr::Func(Func::Sys(SysFunc::OidIn), vec![x]), Some(types::OID)),
                    Some(t) => return Err(cannot_cast(t, "oid")),
                },
                CastTarget::Char => self.char_cast(x, t)?,
                CastTarget::Name | CastTarget::RegProc => {
                    let x = match (t, &x) {
                        (Some(t), _) if RegKind::of(t).is_some() => {
                            Expr::Func(Func::Sys(SysFunc::RegOut(RegKind::of(t).unwrap_or(RegKind::Class))), vec![x])
                        }
                        (None, Expr::Const(Value::Text(s))) if target == CastTarget::RegProc => {
                            Expr::Const(Value::Text(s.strip_prefix("pg_catalog.").unwrap_or(s).to_owned()))
                        }
                        (None, _) => self.coerce(x, None, DataType::Text, "::")?,
                        (Some(DataType::Char(_)), _) => Expr::BpcharTrim(x.boxed()),
                        (Some(t), _) if is_string(Some(t)) => x,
                        (Some(_), _) if target == CastTarget::RegProc => {
                            return Err(SqlError::unsupported("regproc from an oid"));
                        }
                        (Some(_), _) => Expr::Cast(x.boxed(), DataType::Text, true),
                    };
                    (x, Some(DataType::Text))
                }
                CastTarget::Array(elem) => {
                    let ty = elem.data_type();
                    match (t, x) {
                        (None | Some(DataType::Text), Expr::Const(Value::Text(s))) => {
                            (Expr::Const(types::array_input(&s, elem)?), Some(ty))
                        }
                        (_, Expr::Const(Value::Null)) => (Expr::Const(Value::Null), Some(ty)),
                        (None, x) => (self.coerce(x, None, DataType::Text, "::")?, Some(ty)),
                        (Some(from), x) if Elem::of(from) == Some(elem) => (x, Some(ty)),
                        (Some(from), x) => match Elem::of(from) {
                            Some(f) => (Expr::Func(Func::Sys(SysFunc::ArrayCast(f, elem)), vec![x]), Some(ty)),
                            None => return Err(cannot_cast(from, "array")),
                        },
                    }
                }
            }));
        }
        // An ordinary target type from a pseudo type.
        let (Some(from), Some(to)) = (t, plain) else { return Ok(None) };
        if let Some(kind) = RegKind::of(from) {
            if category(to) == Category::String {
                let name = Expr::Func(Func::Sys(SysFunc::RegOut(kind)), vec![x]);
                return Ok(Some((
                    if to == DataType::Text { name } else { Expr::Cast(name.boxed(), to, true) },
                    Some(to),
                )));
            }
            if value::is_integer(to) {
                return Ok(Some((Expr::Cast(x.boxed(), to, true), Some(to))));
            }
            return Err(cannot_cast(from, value::type_name(to)));
        }
        if Elem::of(from).is_some() {
            // A catalog array (its text form) to a real array: array_in.
            if matches!(to, DataType::Array(_)) {
                return Ok(Some((Expr::Cast(x.boxed(), to, true), Some(to))));
            }
            if category(to) == Category::String {
                return Ok(Some((if to == DataType::Text { x } else { Expr::Cast(x.boxed(), to, true) }, Some(to))));
            }
            return Err(cannot_cast(from, value::type_name(to)));
        }
        Ok(None)
    }
}

pub(super) fn cast_target(t: &ast::DataType) -> Option<CastTarget> {
    match t {
        ast::DataType::Regclass => Some(CastTarget::Reg(RegKind::Class)),
        ast::DataType::TsVector => Some(CastTarget::TextSearch(true)),
        ast::DataType::TsQuery => Some(CastTarget::TextSearch(false)),
        ast::DataType::Custom(name, mods) if mods.is_empty() => {
            let last = name.0.last()?.as_ident()?;
            let quoted = last.quote_style.is_some();
            let n = last.value.to_lowercase();
            Some(match n.as_str() {
                "char" if quoted => CastTarget::Char,
                "oid" => CastTarget::Oid,
                "name" => CastTarget::Name,
                "regclass" => CastTarget::Reg(RegKind::Class),
                "regtype" => CastTarget::Reg(RegKind::Type),
                "regnamespace" => CastTarget::Reg(RegKind::Namespace),
                "regrole" => CastTarget::Reg(RegKind::Role),
                "regproc" | "regprocedure" => CastTarget::RegProc,
                "int2vector" => CastTarget::Array(Elem::Int2Vector),
                "oidvector" => CastTarget::Array(Elem::OidVector),
                "tsvector" => CastTarget::TextSearch(true),
                "tsquery" => CastTarget::TextSearch(false),
                _ => return None,
            })
        }
        ast::DataType::Array(
            ast::ArrayElemTypeDef::SquareBracket(inner, None) | ast::ArrayElemTypeDef::AngleBracket(inner),
        ) => {
            let elem = match cast_target(inner) {
                Some(CastTarget::Oid | CastTarget::Reg(_)) => Elem::Oid,
                Some(CastTarget::Name) => Elem::Text,
                Some(CastTarget::Char) => Elem::Char,
                // Arrays of the scalar types are real types (`map_type`).
                Some(_) | None => return None,
            };
            Some(CastTarget::Array(elem))
        }
        _ => None,
    }
}

fn is_string(t: Ty) -> bool {
    t.is_some_and(|t| category(t) == Category::String && Elem::of(t).is_none())
}

/// Whether PostgreSQL has an explicit cast from `from` to `to`, for the
/// types `value::cast` converts: decided when binding, as PostgreSQL does,
/// so `b::bigint` fails on a boolean column of no rows (or only NULLs)
/// too. Kept equal to what `value::cast` refuses (the test below).
pub(super) fn cast_exists(from: DataType, to: DataType) -> bool {
    use Category as C;
    match (category(from), category(to)) {
        // array_coerce: element by element.
        (C::Array, C::Array) => match (crate::value::array::elem_type(from), crate::value::array::elem_type(to)) {
            (Some(f), Some(t)) => cast_exists(f, t),
            _ => false,
        },
        // tsvector and tsquery convert to neither each other nor anything but text.
        (C::TextSearch, _) | (_, C::TextSearch) if from != to => to_is_text(to),
        (a, b) if a == b => true,
        // I/O conversion: any type to a string type and back.
        (C::String, _) | (_, C::String) => true,
        // timestamp and timestamptz to time (their time of day), not date.
        (C::DateTime, C::Time) => from != DataType::Date,
        // time to interval and back (interval_time: the clock part).
        (C::Time, C::Interval) | (C::Interval, C::Time) => true,
        // time_timetz, timetz_time, timestamptz_timetz.
        (C::Time, C::TimeTz) | (C::TimeTz, C::Time) => true,
        (C::DateTime, C::TimeTz) => matches!(from, DataType::TimestampTz(_)),
        // int4(boolean) and bool(integer) only.
        (C::Bool, C::Numeric) => to == DataType::Int4,
        (C::Numeric, C::Bool) => from == DataType::Int4,
        // json <-> jsonb; jsonb to boolean and the numbers (a scalar of that kind).
        (C::Json, C::Jsonb) | (C::Jsonb, C::Json) | (C::Jsonb, C::Numeric | C::Bool) => true,
        _ => false,
    }
}

fn to_is_text(to: DataType) -> bool {
    category(to) == Category::String
}

/// 42846 `cannot cast type x to y` unless `cast_exists`.
pub(super) fn check_cast(from: DataType, to: DataType) -> Result<()> {
    if cast_exists(from, to) { Ok(()) } else { Err(cannot_cast(from, value::type_name(to))) }
}

impl Binder<'_> {
    /// `::"char"`, carried as its output text: from text as charin reads
    /// it, from int4 as i4tochar; PostgreSQL has no other cast to it.
    fn char_cast(&mut self, x: Expr, t: Ty) -> Result<(Expr, Ty)> {
        let char_in = |x: Expr| Expr::Func(Func::Sys(SysFunc::CharIn), vec![x]);
        let x = match (t, x) {
            (None, Expr::Const(Value::Text(s))) => Expr::Const(Value::Text(types::char_from_text(&s))),
            (None, x) => char_in(self.coerce(x, None, DataType::Text, "::")?),
            (Some(DataType::Int4), x) => Expr::Func(Func::Sys(SysFunc::CharFromInt4), vec![x]),
            (Some(t), x) if category(t) == Category::String && Elem::of(t).is_none() => char_in(x),
            (Some(t), _) => return Err(cannot_cast(t, "\"char\"")),
        };
        Ok((x, Some(DataType::Text)))
    }
}

fn cannot_cast(from: DataType, to: &str) -> SqlError {
    SqlError::new("42846", format!("cannot cast type {} to {to}", value::type_name(from)))
}

/// Top-level output: reg* columns print as names; pseudo types show as text.
pub(super) fn finish_output(plan: &mut SelectPlan) {
    for k in 0..plan.visible {
        let Some(t) = plan.columns[k].ty else { continue };
        if let Some(kind) = RegKind::of(t) {
            // Sorting stays by OID, as PostgreSQL sorts regclass: sort keys
            // on this column move to a hidden copy.
            if plan.order_by.iter().any(|s| s.column == k) {
                plan.projection.push(plan.projection[k].clone());
                plan.columns.push(OutputColumn { name: "?column?".into(), ty: Some(t) });
                let hidden = plan.projection.len() - 1;
                for s in &mut plan.order_by {
                    if s.column == k {
                        s.column = hidden;
                    }
                }
            }
            let e = std::mem::replace(&mut plan.projection[k], Expr::Const(Value::Null));
            plan.projection[k] = Expr::Func(Func::Sys(SysFunc::RegOut(kind)), vec![e]);
        }
        plan.columns[k].ty = Some(types::output_type(t));
    }
}

/// Top-level output of a statement: a query's, or the RETURNING of an
/// INSERT, UPDATE or DELETE (reg* columns print as names there too).
pub(super) fn finish_plan_output(plan: &mut crate::plan::Plan) {
    use crate::plan::Plan;
    let (returning, columns) = match plan {
        Plan::Select(s) => return finish_output(s),
        Plan::Partitioned(plans) | Plan::Rules { plans, .. } => return plans.iter_mut().for_each(finish_plan_output),
        Plan::Insert(p) => (&mut p.returning, &mut p.columns),
        Plan::Update(p) => (&mut p.returning, &mut p.columns),
        Plan::Delete(p) => (&mut p.returning, &mut p.columns),
        _ => return,
    };
    for (e, c) in returning.iter_mut().zip(columns.iter_mut()) {
        let Some(t) = c.ty else { continue };
        if let Some(kind) = RegKind::of(t) {
            let x = std::mem::replace(e, Expr::Const(Value::Null));
            *e = Expr::Func(Func::Sys(SysFunc::RegOut(kind)), vec![x]);
        }
        c.ty = Some(types::output_type(t));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cast_exists` says no exactly where `value::cast` refuses a non-NULL
    /// value with 42846.
    #[test]
    fn cast_exists_agrees_with_value_cast() {
        use DataType as T;
        let types = [
            T::Bool,
            T::Int2,
            T::Int4,
            T::Int8,
            T::Numeric { precision: 0, scale: 0 },
            T::Float4,
            T::Float8,
            T::Text,
            T::Varchar(5),
            T::Char(3),
            T::Bytea,
            T::Date,
            T::Timestamp(None),
            T::TimestampTz(Some(3)),
            T::Uuid,
            T::Time(None),
            T::TimeTz(Some(2)),
            T::Interval,
            T::Json,
            T::Jsonb,
        ];
        let arrays = [T::Int4, T::Text, T::Date].map(|e| crate::value::array::array_type(e).unwrap());
        let types: Vec<DataType> = types.into_iter().chain(arrays).collect();
        let scalar = |t: DataType| match t {
            T::Int4 => Value::Int4(1),
            T::Date => Value::Date(1),
            _ => Value::Text("1".into()),
        };
        let sample = |t: DataType| match t {
            T::Array(e) => Value::Array(vec![scalar(e.get())]),
            T::Bool => Value::Bool(true),
            T::Int2 => Value::Int2(1),
            T::Int4 => Value::Int4(1),
            T::Int8 => Value::Int8(1),
            T::Float4 => Value::Float4(1.0),
            T::Float8 => Value::Float8(1.0),
            T::Bytea => Value::Bytea(vec![1]),
            T::Date => Value::Date(1),
            T::Timestamp(_) => Value::Timestamp(1),
            T::TimestampTz(_) => Value::TimestampTz(1),
            T::Time(_) => Value::Time(1),
            T::TimeTz(_) => Value::TimeTz(1, -3600),
            T::Interval => Value::Interval(pgtier_engine::Interval { months: 1, days: 2, micros: 3 }),
            T::Uuid => Value::Uuid([7; 16]),
            T::Json => Value::Json("1".into()),
            T::Jsonb => Value::Jsonb("1".into()),
            T::Numeric { .. } => value::cast(Value::Int4(1), t, true).unwrap(),
            T::Text | T::Varchar(_) | T::Char(_) => Value::Text("1".into()),
        };
        for &from in &types {
            for &to in &types {
                let refused = matches!(value::cast(sample(from), to, true), Err(e) if e.sqlstate == "42846");
                assert_eq!(cast_exists(from, to), !refused, "{from:?} -> {to:?}");
            }
        }
        assert!(!cast_exists(T::Bool, T::Int8) && !cast_exists(T::Int2, T::Bool) && cast_exists(T::Bool, T::Int4));
    }
}
