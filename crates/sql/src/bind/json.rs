//! json and jsonb operators and functions: operand types resolved as
//! PostgreSQL resolves them (an unknown literal takes the json side's type,
//! `->` takes text or integer, paths are text[]); evaluation is
//! crate::value::json.

use std::sync::Arc;

use pgtier_engine::{DataType, TableSchema, Value};
use sqlparser::ast;

use super::{Binder, ExprCtx, Scope, Ty, ident};
use crate::error::{Result, SqlError};
use crate::expr::{Expr, Func};
use crate::plan::{TableFunc, VirtualSource};
use crate::value::json::{JsonFunc, JsonSrf, PathFunc, TEXT_ARRAY_MARK};
use crate::value::types::{self, Elem};
use crate::value::{self, Category, category, type_name};

fn name_of(t: Ty) -> &'static str {
    t.map_or("unknown", type_name)
}

/// Names PostgreSQL has for json that pgtier does not: 0A000 naming them
/// rather than "function does not exist".
pub(super) fn is_unsupported_json_function(name: &str) -> bool {
    name.starts_with("json") || name.starts_with("to_json") || matches!(name, "row_to_json" | "array_to_json")
}

/// The set-returning json function `name`, if it is one.
pub(super) fn json_srf(name: &str) -> Option<JsonSrf> {
    let (jsonb, base) =
        name.strip_prefix("jsonb_").map(|b| (true, b)).or_else(|| name.strip_prefix("json_").map(|b| (false, b)))?;
    Some(match base {
        "each" => JsonSrf::Each { jsonb, text: false },
        "each_text" => JsonSrf::Each { jsonb, text: true },
        "array_elements" => JsonSrf::ArrayElements { jsonb, text: false },
        "array_elements_text" => JsonSrf::ArrayElements { jsonb, text: true },
        "object_keys" => JsonSrf::ObjectKeys { jsonb },
        "path_query" if jsonb => JsonSrf::PathQuery,
        _ => return None,
    })
}

/// `json[b]_to_record[set]`: (jsonb, set).
pub(super) fn to_record_kind(name: &str) -> Option<(bool, bool)> {
    match name {
        "json_to_record" => Some((false, false)),
        "jsonb_to_record" => Some((true, false)),
        "json_to_recordset" => Some((false, true)),
        "jsonb_to_recordset" => Some((true, true)),
        _ => None,
    }
}

impl Binder<'_> {
    /// `json[b]_to_record[set](doc) AS x(col type, ...)` in FROM: the
    /// column definition list is the row type (crate::value::json_record).
    pub(super) fn json_to_record(
        &mut self,
        fname: &str,
        (jsonb, set): (bool, bool),
        args: Vec<(Expr, Ty)>,
        alias: Option<&ast::TableAlias>,
        ordinality: bool,
    ) -> Result<(Arc<TableSchema>, VirtualSource)> {
        let sig = super::from::signature(fname, &args);
        let [(e, t)] = <[(Expr, Ty); 1]>::try_from(args).map_err(|_| SqlError::undefined_function(&sig))?;
        let e = self.json_arg(e, t, if jsonb { DataType::Jsonb } else { DataType::Json }, &sig)?;
        let defs = alias.map(|a| a.columns.as_slice()).unwrap_or_default();
        if defs.is_empty() || defs.iter().any(|c| c.data_type.is_none()) {
            return Err(SqlError::syntax("a column definition list is required for functions returning \"record\""));
        }
        let mut columns = Vec::with_capacity(defs.len());
        for c in defs {
            let ty = match &c.data_type {
                Some(dt) => self.column_type(dt)?,
                None => DataType::Text,
            };
            columns.push((ident(&c.name), ty));
        }
        if ordinality {
            return Err(SqlError::syntax("WITH ORDINALITY cannot be used with a column definition list")
                .with_hint("Put the column definition list inside ROWS FROM()."));
        }
        let cols = columns.clone();
        let domains: Arc<[Option<crate::plan::ColumnDomain>]> = columns.iter().map(|_| None).collect();
        // json[b]_populate_record[set](NULL::record, doc) AS x(...) too.
        let populate = fname.contains("_populate_");
        let spec = crate::value::json_record::RecordSpec { jsonb, set, columns, populate };
        Ok((
            super::detached(fname, cols),
            VirtualSource::Function {
                func: TableFunc::JsonToRecord(Arc::new(spec), domains),
                args: vec![e],
                ordinality: false,
            },
        ))
    }

    /// The arguments of a set-returning json function.
    pub(super) fn json_srf_args(&mut self, srf: JsonSrf, args: Vec<(Expr, Ty)>, sig: &str) -> Result<Vec<Expr>> {
        let jsonb = match srf {
            JsonSrf::Each { jsonb, .. } | JsonSrf::ArrayElements { jsonb, .. } | JsonSrf::ObjectKeys { jsonb } => jsonb,
            JsonSrf::PathQuery => return self.path_args(args, sig),
        };
        let [(e, t)] = <[(Expr, Ty); 1]>::try_from(args).map_err(|_| SqlError::undefined_function(sig))?;
        Ok(vec![self.json_arg(e, t, if jsonb { DataType::Jsonb } else { DataType::Json }, sig)?])
    }

    /// (target jsonb, path jsonpath [, vars jsonb [, silent bool]]).
    fn path_args(&mut self, bound: Vec<(Expr, Ty)>, sig: &str) -> Result<Vec<Expr>> {
        if !(2..=4).contains(&bound.len()) {
            return Err(SqlError::undefined_function(sig));
        }
        let mut out = Vec::new();
        for (k, (e, t)) in bound.into_iter().enumerate() {
            out.push(match k {
                1 => path_arg(e, t, &|| SqlError::undefined_function(sig))?,
                3 => self.boolean(e, t, "silent").map_err(|_| SqlError::undefined_function(sig))?,
                _ => self.json_arg(e, t, DataType::Jsonb, sig)?,
            });
        }
        Ok(out)
    }

    /// jsonb_set, jsonb_insert, jsonb_set_lax: (target, path, new [, flag
    /// [, null_value_treatment]]).
    fn set_function(&mut self, base: &str, bound: Vec<(Expr, Ty)>, sig: &str) -> Result<(JsonFunc, Vec<Expr>)> {
        let name = format!("jsonb_{base}");
        let mut out = Vec::new();
        for (k, (e, t)) in bound.into_iter().enumerate() {
            out.push(match k {
                1 => self.text_array_arg(e, t, &|| SqlError::undefined_function(sig))?,
                3 => self.boolean(e, t, &name).map_err(|_| SqlError::undefined_function(sig))?,
                4 => self.text_arg(e, t, &name).map_err(|_| SqlError::undefined_function(sig))?,
                _ => self.json_arg(e, t, DataType::Jsonb, sig)?,
            });
        }
        let f = match base {
            "set" => JsonFunc::Set,
            "insert" => JsonFunc::Insert,
            _ => JsonFunc::SetLax,
        };
        Ok((f, out))
    }

    /// The functions behind jsonb's operators: jsonb_contains (`@>`),
    /// jsonb_contained (`<@`), jsonb_exists (`?`), _exists_any (`?|`),
    /// _exists_all (`?&`), jsonb_concat (`||`), jsonb_delete (`-` text or
    /// integer), jsonb_delete_path (`#-`).
    fn operator_function(&mut self, base: &str, bound: Vec<(Expr, Ty)>, sig: &str) -> Result<(Expr, Ty)> {
        let undefined = || SqlError::undefined_function(sig);
        if base == "delete" && bound.len() > 2 {
            return Err(SqlError::unsupported("jsonb_delete of several keys (VARIADIC)"));
        }
        let mut it = bound.into_iter();
        let ((x, xt), (y, yt)) = match (it.next(), it.next()) {
            (Some(a), Some(b)) => (a, b),
            _ => return Err(undefined()),
        };
        let x = self.json_arg(x, xt, DataType::Jsonb, sig)?;
        let (f, args) = match base {
            "concat" => (JsonFunc::Concat, vec![x, self.json_arg(y, yt, DataType::Jsonb, sig)?]),
            // jsonb_delete(jsonb, text) and (jsonb, integer): an untyped
            // literal is text, the preferred type of its category.
            "delete" => {
                let y = match yt {
                    Some(t) if value::is_int4_implicit(t) => y,
                    _ => self.text_scalar_arg(y, yt, &undefined)?,
                };
                (JsonFunc::Delete, vec![x, y])
            }
            "delete_path" => (JsonFunc::DeletePath, vec![x, self.text_array_arg(y, yt, &undefined)?]),
            "contains" => (JsonFunc::Contains, vec![x, self.json_arg(y, yt, DataType::Jsonb, sig)?]),
            "contained" => (JsonFunc::Contains, vec![self.json_arg(y, yt, DataType::Jsonb, sig)?, x]),
            "exists" => (JsonFunc::Exists, vec![x, self.text_scalar_arg(y, yt, &undefined)?]),
            "exists_any" => (JsonFunc::ExistsAny, vec![x, self.text_array_arg(y, yt, &undefined)?]),
            _ => (JsonFunc::ExistsAll, vec![x, self.text_array_arg(y, yt, &undefined)?]),
        };
        let rt = if matches!(f, JsonFunc::Concat | JsonFunc::Delete | JsonFunc::DeletePath) {
            DataType::Jsonb
        } else {
            DataType::Bool
        };
        Ok((Expr::Func(Func::Json(f), args), Some(rt)))
    }

    /// jsonb_path_exists, _match, _query_array, _query_first.
    fn path_function(
        &mut self,
        name: &str,
        base: &str,
        bound: Vec<(Expr, Ty)>,
        sig: &str,
    ) -> Result<Option<(Expr, Ty)>> {
        let f = match base {
            "path_exists" => PathFunc::Exists,
            "path_match" => PathFunc::Match,
            "path_query_array" => PathFunc::QueryArray,
            "path_query_first" => PathFunc::QueryFirst,
            "path_query" => {
                return Err(SqlError::unsupported(format!(
                    "{name} in this position (set-returning json functions are supported in FROM and alone in a select list without FROM)"
                )));
            }
            _ => return Err(SqlError::unsupported(format!("function {name}"))),
        };
        let rt = if matches!(f, PathFunc::Exists | PathFunc::Match) { DataType::Bool } else { DataType::Jsonb };
        Ok(Some((Expr::Func(Func::Json(JsonFunc::Path(f)), self.path_args(bound, sig)?), Some(rt))))
    }

    /// `jsonb @? jsonpath` and `jsonb @@ jsonpath` (silent
    /// jsonb_path_exists / jsonb_path_match); None for other operators.
    fn path_op(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<Option<(Expr, Ty)>> {
        use ast::BinaryOperator as B;
        let f = match op {
            B::AtQuestion => PathFunc::ExistsOp,
            B::AtAt => PathFunc::MatchOp,
            _ => return Ok(None),
        };
        let (x, xt) = self.expr(left, scope, ctx)?;
        let (y, yt) = self.expr(right, scope, ctx)?;
        let x = match xt {
            Some(DataType::Jsonb) => x,
            None if f == PathFunc::ExistsOp => self.coerce(x, None, DataType::Jsonb, "@?")?,
            // An untyped left side: a tsquery against a tsvector, else text.
            None if f == PathFunc::MatchOp && yt.is_some_and(|t| t != DataType::Jsonb) => {
                use crate::expr::textsearch;
                let left = if yt == Some(crate::value::types::TSVECTOR) {
                    textsearch::cast_from_text(textsearch::cast_def(), self, x, None, false)?
                } else {
                    (self.coerce(x, None, DataType::Text, "@@")?, Some(DataType::Text))
                };
                return textsearch::bind_match(self, left, (y, yt)).map(Some);
            }
            Some(_) if f == PathFunc::MatchOp => {
                return crate::expr::textsearch::bind_match(self, (x, xt), (y, yt)).map(Some);
            }
            _ => return Err(SqlError::unsupported(format!("operator {op} on {}", name_of(xt)))),
        };
        let y = path_arg(y, yt, &|| SqlError::undefined_operator(&format!("jsonb {op} {}", name_of(yt))))?;
        Ok(Some((Expr::Func(Func::Json(JsonFunc::Path(f)), vec![x, y]), Some(DataType::Bool))))
    }

    /// The json operators (`->`, `->>`, `#>`, `#>>`, `@>`, `<@`, `?`,
    /// `?|`, `?&`, `#-`); None for other operators.
    pub(super) fn json_op(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<Option<(Expr, Ty)>> {
        use ast::BinaryOperator as B;
        if let Some(done) = self.path_op(left, op, right, scope, ctx)? {
            return Ok(Some(done));
        }
        if !matches!(
            op,
            B::Arrow
                | B::LongArrow
                | B::HashArrow
                | B::HashLongArrow
                | B::AtArrow
                | B::ArrowAt
                | B::Question
                | B::QuestionAnd
                | B::QuestionPipe
                | B::HashMinus
        ) {
            return Ok(None);
        }
        let (x, xt) = self.expr(left, scope, ctx)?;
        let (y, yt) = self.expr(right, scope, ctx)?;
        // `@>` and `<@` of arrays are the array operators.
        if matches!(op, B::AtArrow | B::ArrowAt)
            && (crate::value::array::is_array(xt) || crate::value::array::is_array(yt))
        {
            return self
                .array_set_op(op, x, xt, y, yt)?
                .ok_or_else(|| SqlError::unsupported(format!("operator {op}")))
                .map(Some);
        }
        let sym = op.to_string();
        let undefined = || SqlError::undefined_operator(&format!("{} {sym} {}", name_of(xt), name_of(yt)));
        // `<@` is `@>` with the operands swapped.
        let (x, xt, y, yt) = if matches!(op, B::ArrowAt) { (y, yt, x, xt) } else { (x, xt, y, yt) };
        let jsonb = match xt {
            Some(DataType::Jsonb) => true,
            Some(DataType::Json) if matches!(op, B::Arrow | B::LongArrow | B::HashArrow | B::HashLongArrow) => false,
            None if matches!(op, B::AtArrow | B::ArrowAt) && yt == Some(DataType::Jsonb) => true,
            None if matches!(op, B::Arrow | B::LongArrow | B::HashArrow | B::HashLongArrow) => {
                return Err(SqlError::new("42725", format!("operator is not unique: unknown {sym} {}", name_of(yt)))
                    .with_hint(
                        "Could not choose a best candidate operator. You might need to add explicit type casts.",
                    ));
            }
            _ => return Err(undefined()),
        };
        let json_t = if jsonb { DataType::Jsonb } else { DataType::Json };
        let x = if xt.is_none() { self.coerce(x, None, json_t, &sym)? } else { x };
        let text = matches!(op, B::LongArrow | B::HashLongArrow);
        let (f, y, rt) = match op {
            B::Arrow | B::LongArrow => {
                let y = match yt {
                    None => self.coerce(y, None, DataType::Text, &sym)?,
                    Some(t) if category(t) == Category::String && Elem::of(t).is_none() => {
                        self.text_arg(y, yt, &sym)?
                    }
                    Some(t) if value::is_int4_implicit(t) => y,
                    Some(_) => return Err(undefined()),
                };
                (JsonFunc::Get { jsonb, text }, y, if text { DataType::Text } else { json_t })
            }
            B::HashArrow | B::HashLongArrow => (
                JsonFunc::GetPath { jsonb, text },
                self.text_array_arg(y, yt, &undefined)?,
                if text { DataType::Text } else { json_t },
            ),
            B::AtArrow | B::ArrowAt => {
                let y = match yt {
                    None => self.coerce(y, None, DataType::Jsonb, &sym)?,
                    Some(DataType::Jsonb) => y,
                    Some(_) => return Err(undefined()),
                };
                (JsonFunc::Contains, y, DataType::Bool)
            }
            B::Question => (JsonFunc::Exists, self.text_scalar_arg(y, yt, &undefined)?, DataType::Bool),
            B::QuestionPipe | B::QuestionAnd => {
                let f = if matches!(op, B::QuestionPipe) { JsonFunc::ExistsAny } else { JsonFunc::ExistsAll };
                (f, self.text_array_arg(y, yt, &undefined)?, DataType::Bool)
            }
            _ => (JsonFunc::DeletePath, self.text_array_arg(y, yt, &undefined)?, DataType::Jsonb),
        };
        Ok(Some((Expr::Func(Func::Json(f), vec![x, y]), Some(rt))))
    }

    /// `j['a'][0]` on jsonb: `j #> ARRAY['a', '0']` (jsonbsubs.c: each
    /// subscript integer or text, as text in the path, where an array
    /// reads a numeric one as its index; a NULL subscript gives NULL).
    /// Assignment through it is the UPDATE binder's (refused there).
    pub(super) fn jsonb_subscript(
        &mut self,
        j: Expr,
        chain: &[ast::AccessExpr],
        scope: &Scope<'_>,
        ctx: &mut ExprCtx,
    ) -> Result<(Expr, Ty)> {
        let mut path = Vec::new();
        for access in chain {
            let ast::AccessExpr::Subscript(sub) = access else {
                return Err(SqlError::unsupported("this field access"));
            };
            let ast::Subscript::Index { index } = sub else {
                return Err(SqlError::new("42804", "jsonb subscript does not support slices"));
            };
            let (i, it) = self.expr(index, scope, ctx)?;
            path.push(self.jsonb_subscript_text(i, it)?);
        }
        // A text[] as the path operators take it (a catalog-form array).
        let path = Expr::Func(Func::Sys(crate::expr::SysFunc::MakeArray(Elem::Text)), path);
        Ok((
            Expr::Func(Func::Json(JsonFunc::GetPath { jsonb: true, text: false }), vec![j, path]),
            Some(DataType::Jsonb),
        ))
    }

    /// One jsonb subscript as the text path step it is (jsonbsubs.c's
    /// transform: an integer, a string, or an untyped literal as text).
    fn jsonb_subscript_text(&mut self, i: Expr, it: Ty) -> Result<Expr> {
        match it {
            None => self.coerce(i, None, DataType::Text, "subscript"),
            Some(t) if value::is_int4_implicit(t) => self.result_cast(i, it, Some(DataType::Text)),
            Some(t) if category(t) == Category::String && Elem::of(t).is_none() => self.text_arg(i, it, "subscript"),
            Some(t) => Err(SqlError::new("42804", format!("subscript type {} is not supported", type_name(t)))
                .with_hint("jsonb subscript must be coercible to either integer or text.")),
        }
    }

    /// UPDATE's `SET j[s1][s2]... = v` on a jsonb column (the arguments
    /// after `parse::SUBSCRIPT_ASSIGN`'s spec, which says no slice): the
    /// value takes jsonb's assignment casts (an untyped literal, jsonb,
    /// json), as transformAssignmentIndirection checks.
    pub(super) fn jsonb_subscript_assign(
        &mut self,
        j: Expr,
        (v, vt): (Expr, Ty),
        spec: &str,
        subs: Vec<(Expr, Ty)>,
        column: &str,
    ) -> Result<(Expr, Ty)> {
        if spec.contains('s') {
            return Err(SqlError::new("42804", "jsonb subscript does not support slices"));
        }
        let v = match vt {
            None => self.coerce(v, None, DataType::Jsonb, "subscripted assignment")?,
            Some(DataType::Jsonb) => v,
            Some(DataType::Json) => Expr::Cast(v.boxed(), DataType::Jsonb, false),
            Some(t) => {
                return Err(SqlError::new(
                    "42804",
                    format!(
                        "subscripted assignment to \"{column}\" requires type jsonb but expression is of type {}",
                        type_name(t)
                    ),
                )
                .with_hint("You will need to rewrite or cast the expression."));
            }
        };
        let expect_array = subs.first().is_some_and(|(_, t)| t.is_some_and(value::is_int4_implicit));
        let mut args = vec![j, v];
        for (i, it) in subs {
            args.push(self.jsonb_subscript_text(i, it)?);
        }
        let f = JsonFunc::SubscriptAssign { expect_array };
        Ok((Expr::Func(Func::Json(f), args), Some(DataType::Jsonb)))
    }

    fn text_scalar_arg(&mut self, y: Expr, yt: Ty, undefined: &dyn Fn() -> SqlError) -> Result<Expr> {
        match yt {
            None => self.coerce(y, None, DataType::Text, "?"),
            Some(t) if category(t) == Category::String && Elem::of(t).is_none() => self.text_arg(y, yt, "?"),
            Some(_) => Err(undefined()),
        }
    }

    /// A text[] operand: an array literal, a text[] value.
    fn text_array_arg(&mut self, y: Expr, yt: Ty, undefined: &dyn Fn() -> SqlError) -> Result<Expr> {
        match (yt, y) {
            (None, Expr::Const(Value::Text(s))) => Ok(Expr::Const(types::array_input(&s, Elem::Text)?)),
            (None, Expr::Const(Value::Null)) => Ok(Expr::Const(Value::Null)),
            (None, Expr::Param(i)) => {
                self.params[i] = Some(Elem::Text.data_type());
                Ok(Expr::Param(i))
            }
            (Some(t), y) if Elem::of(t) == Some(Elem::Text) => Ok(y),
            // A real text[] (ARRAY['a'], '{a}'::text[]) as the text form the json functions read.
            (Some(t), y) if is_text_array(t) => Ok(Expr::Cast(y.boxed(), DataType::Text, false)),
            _ => Err(undefined()),
        }
    }

    /// jsonb `||` and `-` (called with both operands bound, one of them jsonb).
    pub(super) fn jsonb_binary(
        &mut self,
        op: &ast::BinaryOperator,
        x: Expr,
        xt: Ty,
        y: Expr,
        yt: Ty,
    ) -> Result<Option<(Expr, Ty)>> {
        use ast::BinaryOperator as B;
        let sym = op.to_string();
        let undefined = || SqlError::undefined_operator(&format!("{} {sym} {}", name_of(xt), name_of(yt)));
        match op {
            B::StringConcat => {
                // jsonb || text is anynonarray || text: string concatenation.
                if [xt, yt].iter().any(|t| t.is_some_and(|t| category(t) == Category::String)) {
                    return Ok(None);
                }
                let mut out = Vec::new();
                for (e, t) in [(x, xt), (y, yt)] {
                    out.push(match t {
                        None => self.coerce(e, None, DataType::Jsonb, &sym)?,
                        Some(DataType::Jsonb) => e,
                        Some(_) => return Err(undefined()),
                    });
                }
                Ok(Some((Expr::Func(Func::Json(JsonFunc::Concat), out), Some(DataType::Jsonb))))
            }
            B::Minus if xt == Some(DataType::Jsonb) => {
                let y = match yt {
                    None => self.coerce(y, None, DataType::Text, &sym)?,
                    Some(t) if Elem::of(t) == Some(Elem::Text) => {
                        Expr::Concat(Expr::Const(Value::Text(TEXT_ARRAY_MARK.to_owned())).boxed(), y.boxed())
                    }
                    Some(t) if is_text_array(t) => {
                        let text = Expr::Cast(y.boxed(), DataType::Text, false);
                        Expr::Concat(Expr::Const(Value::Text(TEXT_ARRAY_MARK.to_owned())).boxed(), text.boxed())
                    }
                    Some(t) if category(t) == Category::String && Elem::of(t).is_none() => {
                        self.text_arg(y, yt, &sym)?
                    }
                    Some(t) if value::is_int4_implicit(t) => y,
                    Some(_) => return Err(undefined()),
                };
                Ok(Some((Expr::Func(Func::Json(JsonFunc::Delete), vec![x, y]), Some(DataType::Jsonb))))
            }
            _ => Err(undefined()),
        }
    }

    /// An argument that must be `want` (json or jsonb): an unknown literal
    /// is read as one; no other type converts implicitly.
    pub(super) fn json_arg(&mut self, e: Expr, t: Ty, want: DataType, sig: &str) -> Result<Expr> {
        match t {
            None => self.coerce(e, None, want, sig),
            Some(t) if t == want => Ok(e),
            Some(_) => Err(SqlError::undefined_function(sig)),
        }
    }

    /// array_to_json(anyarray [, pretty]): to_json's text of the array
    /// (its layout is array_to_json's); pretty's line feeds are refused.
    pub(super) fn array_to_json(&mut self, bound: Vec<(Expr, Ty)>, sig: &str) -> Result<(Expr, Ty)> {
        let mut it = bound.into_iter();
        let (Some((a, at)), pretty, None) = (it.next(), it.next(), it.next()) else {
            return Err(SqlError::undefined_function(sig));
        };
        match at {
            None => {
                return Err(SqlError::datatype_mismatch(
                    "could not determine polymorphic type because input has type unknown".to_owned(),
                ));
            }
            Some(t) if types::is_pseudo(t) => return Err(SqlError::unsupported("array_to_json of a system array")),
            Some(t) if !crate::value::array::is_array(Some(t)) => return Err(SqlError::undefined_function(sig)),
            Some(_) => {}
        }
        let json = Expr::Func(Func::Json(JsonFunc::To { jsonb: false }), vec![a]);
        match pretty {
            None | Some((Expr::Const(Value::Bool(false)), _)) => Ok((json, Some(DataType::Json))),
            // Strict: a NULL pretty flag makes the result NULL.
            Some((Expr::Const(Value::Null), None | Some(DataType::Bool))) => {
                Ok((Expr::Const(Value::Null), Some(DataType::Json)))
            }
            Some((_, None | Some(DataType::Bool))) => {
                Err(SqlError::unsupported("array_to_json with pretty line feeds"))
            }
            Some(_) => Err(SqlError::undefined_function(sig)),
        }
    }

    /// The json functions; None when `name` is not one.
    pub(super) fn json_function(
        &mut self,
        name: &str,
        bound: Vec<(Expr, Ty)>,
        sig: &str,
    ) -> Result<Option<(Expr, Ty)>> {
        let (jsonb, base) = if let Some(b) = name.strip_prefix("jsonb_") {
            (true, b)
        } else if let Some(b) = name.strip_prefix("json_") {
            (false, b)
        } else {
            match name {
                "to_jsonb" => (true, "to"),
                "to_json" => (false, "to"),
                _ => return Ok(None),
            }
        };
        let json_t = if jsonb { DataType::Jsonb } else { DataType::Json };
        let n = bound.len();
        let arity =
            |lo: usize, hi: usize| if n < lo || n > hi { Err(SqlError::undefined_function(sig)) } else { Ok(()) };
        let one = |b: &mut Self, bound: Vec<(Expr, Ty)>| -> Result<Vec<Expr>> {
            let mut out = Vec::new();
            for (e, t) in bound {
                out.push(b.json_arg(e, t, json_t, sig)?);
            }
            Ok(out)
        };
        let (f, args, rt) = match base {
            "to" => {
                arity(1, 1)?;
                let (e, t) = bound.into_iter().next().ok_or_else(|| SqlError::undefined_function(sig))?;
                if t.is_none() {
                    return Err(SqlError::datatype_mismatch(
                        "could not determine polymorphic type because input has type unknown".to_owned(),
                    ));
                }
                if t.is_some_and(types::is_pseudo) {
                    return Err(SqlError::unsupported(format!("{name} of an array or a system type")));
                }
                (JsonFunc::To { jsonb }, vec![e], json_t)
            }
            "build_object" | "build_array" => {
                let mut out = Vec::new();
                for (e, t) in bound {
                    if t.is_some_and(types::is_pseudo) {
                        return Err(SqlError::unsupported(format!("{name} of an array or a system type")));
                    }
                    out.push(if t.is_none() { self.coerce(e, None, DataType::Text, name)? } else { e });
                }
                let f = if base == "build_object" {
                    JsonFunc::BuildObject { jsonb }
                } else {
                    JsonFunc::BuildArray { jsonb }
                };
                (f, out, json_t)
            }
            "typeof" => {
                arity(1, 1)?;
                (JsonFunc::Typeof { jsonb }, one(self, bound)?, DataType::Text)
            }
            "array_length" => {
                arity(1, 1)?;
                (JsonFunc::ArrayLength { jsonb }, one(self, bound)?, DataType::Int4)
            }
            "strip_nulls" => {
                arity(1, 1)?;
                (JsonFunc::StripNulls { jsonb }, one(self, bound)?, json_t)
            }
            "pretty" if jsonb => {
                arity(1, 1)?;
                (JsonFunc::Pretty, one(self, bound)?, DataType::Text)
            }
            "extract_path" | "extract_path_text" => {
                arity(1, usize::MAX)?;
                let text = base.ends_with("_text");
                let mut it = bound.into_iter();
                let (e, t) = it.next().ok_or_else(|| SqlError::undefined_function(sig))?;
                let mut out = vec![self.json_arg(e, t, json_t, sig)?];
                for (e, t) in it {
                    out.push(self.text_arg(e, t, name).map_err(|_| SqlError::undefined_function(sig))?);
                }
                (JsonFunc::ExtractPath { jsonb, text }, out, if text { DataType::Text } else { json_t })
            }
            "set" | "insert" | "set_lax" if jsonb => {
                arity(3, if base == "set_lax" { 5 } else { 4 })?;
                let (f, out) = self.set_function(base, bound, sig)?;
                (f, out, DataType::Jsonb)
            }
            b if jsonb && b.starts_with("path_") => return self.path_function(name, b, bound, sig),
            "contains" | "contained" | "exists" | "exists_any" | "exists_all" | "concat" | "delete" | "delete_path"
                if jsonb =>
            {
                arity(2, if base == "delete" { usize::MAX } else { 2 })?;
                return self.operator_function(base, bound, sig).map(Some);
            }
            "object" => {
                arity(1, 2)?;
                let mut out = Vec::new();
                for (e, t) in bound {
                    out.push(match (t, e) {
                        // array_in's check of a literal, of any number of dimensions.
                        (None, Expr::Const(Value::Text(s))) => {
                            crate::value::array::array_in(&s, DataType::Text)?;
                            Expr::Const(Value::Text(s))
                        }
                        (t, e) => self.text_array_arg(e, t, &|| SqlError::undefined_function(sig))?,
                    });
                }
                (JsonFunc::Object { jsonb }, out, json_t)
            }
            "each" | "each_text" | "array_elements" | "array_elements_text" | "object_keys" => {
                return Err(SqlError::unsupported(format!(
                    "{name} in this position (set-returning json functions are supported in FROM and alone in a select list without FROM)"
                )));
            }
            _ => return Err(SqlError::unsupported(format!("function {name}"))),
        };
        Ok(Some((Expr::Func(Func::Json(f), args), Some(rt))))
    }
}

/// A named argument (`silent => true`) of a jsonb_path_ function.
pub(super) fn named_arg(a: &ast::FunctionArg, fname: &str) -> Result<(String, ast::Expr)> {
    match a {
        ast::FunctionArg::Named { name, arg: ast::FunctionArgExpr::Expr(e), .. }
        | ast::FunctionArg::ExprNamed {
            name: ast::Expr::Identifier(name), arg: ast::FunctionArgExpr::Expr(e), ..
        } => Ok((super::ident(name), e.clone())),
        ast::FunctionArg::Unnamed(_) => Err(SqlError::syntax("positional argument cannot follow named argument")),
        _ => Err(SqlError::unsupported(format!("argument form in {fname}()"))),
    }
}

/// The json functions pgtier calls with `name => value` arguments.
pub(super) fn takes_named_args(fname: &str) -> bool {
    fname.starts_with("jsonb_path_") || fname == "jsonb_set_lax"
}

/// The positional arguments of a call with named ones: jsonb_path_
/// (target, path, vars default '{}', silent default false) or
/// jsonb_set_lax (jsonb_in, path, replacement, create_if_missing default
/// true, null_value_treatment default 'use_json_null').
pub(super) fn path_named_args(
    args: Vec<ast::Expr>,
    named: Vec<(String, ast::Expr)>,
    fname: &str,
) -> Result<Vec<ast::Expr>> {
    let text = |s: &str| Some(ast::Expr::value(ast::Value::SingleQuotedString(s.to_owned())));
    let boolean = |b: bool| Some(ast::Expr::value(ast::Value::Boolean(b)));
    let (names, defaults): (&[&str], Vec<Option<ast::Expr>>) = if fname == "jsonb_set_lax" {
        (
            &["jsonb_in", "path", "replacement", "create_if_missing", "null_value_treatment"],
            vec![None, None, None, boolean(true), text("use_json_null")],
        )
    } else {
        (&["target", "path", "vars", "silent"], vec![None, None, text("{}"), boolean(false)])
    };
    let undefined = || SqlError::undefined_function(&format!("{fname} with these named arguments"));
    let mut slots: Vec<Option<ast::Expr>> = vec![None; names.len()];
    if args.len() > names.len() {
        return Err(undefined());
    }
    for (k, e) in args.into_iter().enumerate() {
        slots[k] = Some(e);
    }
    for (n, e) in named {
        let k = names.iter().position(|x| *x == n).ok_or_else(undefined)?;
        if slots[k].is_some() {
            return Err(undefined());
        }
        slots[k] = Some(e);
    }
    let given = slots.iter().rposition(Option::is_some).map_or(0, |k| k + 1);
    let mut out = Vec::new();
    for (s, d) in slots.into_iter().zip(defaults).take(given) {
        out.push(s.or(d).ok_or_else(undefined)?);
    }
    Ok(out)
}

/// A jsonpath argument: pgtier has no jsonpath type, so an untyped
/// literal, read (and its syntax checked, 42601) here; a typed value has
/// no implicit cast to jsonpath in PostgreSQL either.
fn path_arg(e: Expr, t: Ty, undefined: &dyn Fn() -> SqlError) -> Result<Expr> {
    match (e, t) {
        (Expr::Const(Value::Text(s)), None) => {
            crate::expr::jsonpath::parse(&s)?;
            Ok(Expr::Const(Value::Text(s)))
        }
        (Expr::Const(Value::Null), None) => Ok(Expr::Const(Value::Null)),
        (_, None) => Err(SqlError::unsupported("a jsonpath other than a literal (pgtier has no jsonpath type)")),
        (_, Some(_)) => Err(undefined()),
    }
}

/// A real array of text or varchar (the `text[]` the json operators take).
fn is_text_array(t: DataType) -> bool {
    matches!(crate::value::array::elem_type(t), Some(DataType::Text | DataType::Varchar(_)))
}
