//! The functions drivers and psql call on the system catalogs and the
//! session (version(), current_setting, format_type, pg_get_indexdef, ...),
//! the array helpers they need, regular-expression matches, the `reg*`
//! input/output conversions and the sequence functions. Evaluated by
//! [`eval`] with the catalog snapshot and settings from
//! [`SubqueryRunner::system`].

use std::collections::HashMap;

use pgtier_engine::{Catalog, DataType, Value};

use crate::catalog::{
    self as cat, RELATIONS, Schema, SysCtx, constraint_def, format_type, index_def, quote_ident, reg_lookup, reg_name,
};
use crate::error::{Result, SqlError};
use crate::expr::{CmpOp, Env, Expr, SubqueryRunner};
use crate::settings::{READ_ONLY_SETTINGS, normalize_setting, search_path_with, setting_value};
use crate::value;
use crate::value::types::{self, Elem, RegKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysFunc {
    Version,
    CurrentSetting,
    SetConfig,
    CurrentDatabase,
    CurrentSchema,
    CurrentSchemas,
    CurrentUser,
    BackendPid,
    FormatType,
    IndexDef,
    /// pg_get_viewdef(oid [, pretty]): NULL for what is not a view.
    ViewDef,
    /// pg_get_partkeydef(oid).
    PartKeyDef,
    /// pg_get_viewdef(name [, pretty]).
    ViewDefByName,
    ConstraintDef,
    GetExpr,
    UserById,
    TableIsVisible,
    TypeIsVisible,
    /// obj_description, col_description, ...: pgtier keeps no comments.
    NoDescription,
    EncodingToChar,
    /// has_*_privilege, pg_has_role (catalog/roles.rs `has_privilege`).
    HasPrivilege(crate::catalog::roles::PrivilegeFn),
    /// session_user (current_user is `CurrentUser`: SET ROLE's role).
    SessionUser,
    RelationIsPublishable,
    /// Functions about objects pgtier never has (triggers, statistics
    /// objects, views, sequences): NULL, as PostgreSQL answers for a
    /// missing object.
    NullResult,
    IsInRecovery,
    QuoteIdent,
    /// pg_get_function_result / _arguments / _identity_arguments,
    /// pg_function_is_visible of a function made with CREATE FUNCTION
    /// (NULL for another oid: pg_proc lists no built-in function).
    FunctionInfo(crate::catalog::functions::FnInfo),
    /// An oid that prints as a name.
    RegOut(RegKind),
    /// Text to oid by name lookup; `to_regclass` (missing_ok) yields NULL.
    RegIn(RegKind, bool),
    /// text → oid (oidin's range and wrap).
    OidIn,
    /// integer → oid; true for int8 (range-checked), false for int4/int2 (reinterpreted).
    OidFromInt(bool),
    /// text → `"char"` (charin / text_char: one byte, `\ooo` read).
    CharIn,
    /// int4 → `"char"` (i4tochar).
    CharFromInt4,
    ArrayToString(Elem),
    ArrayUpper(Elem),
    ArrayLower(Elem),
    ArrayLength(Elem),
    Cardinality(Elem),
    Subscript(Elem),
    /// `&`, `|`, `#` on integers of the given type.
    Bit(BitOp, DataType),
    /// The `(x,n)` row of `_pg_expandarray` over an array of `Elem`.
    ExpandRecord(Elem),
    /// Field `k` (0: x, 1: n) of such a row.
    RecordField(Elem, usize),
    MakeArray(Elem),
    /// `array || array`.
    ArrayConcat(Elem),
    /// Between array/vector types (`int2vector::int2[]`).
    ArrayCast(Elem, Elem),
    /// `lhs op ANY (array)`.
    Any(CmpOp, Elem),
    Regex {
        negated: bool,
        case_insensitive: bool,
    },
    /// nextval, currval, setval, lastval: evaluated by the executor
    /// ([`SubqueryRunner::sequence`]), which holds the transaction.
    Sequence(SeqFunc),
    /// `pg_get_serial_sequence(table, column)`.
    SerialSequence,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    /// `<<` and `>>`: the count is an int4 whatever the left side's type.
    Shl,
    Shr,
    /// Prefix `~` (the second operand is ignored).
    Not,
}

impl BitOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BitOp::And => "&",
            BitOp::Or => "|",
            BitOp::Xor => "#",
            BitOp::Shl => "<<",
            BitOp::Shr => ">>",
            BitOp::Not => "~",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqFunc {
    Nextval,
    Currval,
    /// `setval(seq, value [, is_called])`.
    Setval,
    Lastval,
}

/// Evaluates a system function.
pub fn eval(f: SysFunc, args: &[Expr], env: &Env<'_>, sq: &mut dyn SubqueryRunner, row: &[Value]) -> Result<Value> {
    let mut vals = Vec::with_capacity(args.len());
    for a in args {
        vals.push(a.eval(env, sq, row)?);
    }
    let strict = !matches!(
        f,
        SysFunc::CurrentSetting
            | SysFunc::ArrayToString(_)
            | SysFunc::MakeArray(_)
            | SysFunc::Any(..)
            | SysFunc::FormatType
            | SysFunc::ArrayConcat(_)
            | SysFunc::ExpandRecord(_)
    );
    if strict && vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    if let SysFunc::Sequence(call) = f {
        return sq.sequence(call, &vals);
    }
    if !needs_catalog(f) {
        return eval_pure(f, &vals);
    }
    let Some(ctx) = sq.system() else {
        return Err(SqlError::new("0A000", "system functions are not supported in this context"));
    };
    eval_catalog(f, &vals, ctx)
}

/// Whether `f` reads the catalog snapshot or the session's settings
/// (evaluated with [`SubqueryRunner::system`]); the others are pure.
pub(crate) fn needs_catalog(f: SysFunc) -> bool {
    match f {
        SysFunc::CurrentSetting
        | SysFunc::SetConfig
        | SysFunc::IsInRecovery
        | SysFunc::CurrentDatabase
        | SysFunc::CurrentSchema
        | SysFunc::CurrentSchemas
        | SysFunc::CurrentUser
        | SysFunc::SessionUser
        | SysFunc::HasPrivilege(_)
        | SysFunc::UserById
        | SysFunc::IndexDef
        | SysFunc::ViewDef
        | SysFunc::PartKeyDef
        | SysFunc::ViewDefByName
        | SysFunc::FunctionInfo(_)
        | SysFunc::ConstraintDef
        | SysFunc::TableIsVisible
        | SysFunc::RelationIsPublishable
        | SysFunc::SerialSequence
        | SysFunc::RegOut(_)
        | SysFunc::RegIn(..) => true,
        SysFunc::Version
        | SysFunc::BackendPid
        | SysFunc::FormatType
        | SysFunc::GetExpr
        | SysFunc::NoDescription
        | SysFunc::NullResult
        | SysFunc::EncodingToChar
        | SysFunc::QuoteIdent
        | SysFunc::TypeIsVisible
        | SysFunc::ArrayToString(_)
        | SysFunc::ArrayUpper(_)
        | SysFunc::ArrayLower(_)
        | SysFunc::ArrayLength(_)
        | SysFunc::Cardinality(_)
        | SysFunc::Subscript(_)
        | SysFunc::MakeArray(_)
        | SysFunc::Bit(..)
        | SysFunc::ExpandRecord(_)
        | SysFunc::RecordField(..)
        | SysFunc::ArrayConcat(_)
        | SysFunc::ArrayCast(..)
        | SysFunc::Any(..)
        | SysFunc::Regex { .. }
        | SysFunc::OidIn
        | SysFunc::OidFromInt(_)
        | SysFunc::CharIn
        | SysFunc::CharFromInt4
        | SysFunc::Sequence(_) => false,
    }
}

/// The functions that need no catalog: the session-independent ones here,
/// then arrays ([`eval_arrays`]), then operators and oids ([`eval_operators`]).
fn eval_pure(f: SysFunc, vals: &[Value]) -> Result<Value> {
    let int = |k: usize| vals.get(k).and_then(Value::as_i64).unwrap_or(0);
    let txt = |k: usize| vals.get(k).and_then(Value::as_str).unwrap_or("");
    match f {
        SysFunc::Version => {
            return Ok(Value::Text(format!(
                "PostgreSQL 15.0 (pgtier {}) on {}-pc-{}-gnu, compiled by rustc, 64-bit",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::ARCH,
                std::env::consts::OS
            )));
        }
        SysFunc::BackendPid => return Ok(Value::Int4(i32::try_from(std::process::id()).unwrap_or(0))),
        SysFunc::FormatType => {
            // A NULL typmod is allowed (and differs from -1 for bpchar).
            return Ok(match &vals[0] {
                Value::Null => Value::Null,
                _ => Value::Text(format_type(int(0), vals[1].as_i64())),
            });
        }
        SysFunc::GetExpr => return Ok(vals[0].clone()),
        SysFunc::NoDescription | SysFunc::NullResult => return Ok(Value::Null),
        SysFunc::EncodingToChar => {
            return Ok(Value::Text(
                match int(0) {
                    0 => "SQL_ASCII",
                    6 => "UTF8",
                    _ => "",
                }
                .to_owned(),
            ));
        }
        SysFunc::QuoteIdent => return Ok(Value::Text(quote_ident(txt(0)))),
        SysFunc::TypeIsVisible => {
            return Ok(if cat::type_by_oid(int(0)).is_some() { Value::Bool(true) } else { Value::Null });
        }
        _ => {}
    }
    eval_arrays(f, vals)
}

/// Arrays as text (`{..}`): array_to_string, array_upper / lower / length,
/// cardinality, subscripts, ARRAY[...].
fn eval_arrays(f: SysFunc, vals: &[Value]) -> Result<Value> {
    let int = |k: usize| vals.get(k).and_then(Value::as_i64).unwrap_or(0);
    let txt = |k: usize| vals.get(k).and_then(Value::as_str).unwrap_or("");
    match f {
        SysFunc::ArrayToString(e) => {
            if vals[0].is_null() || vals[1].is_null() {
                return Ok(Value::Null);
            }
            let null_as = vals.get(2).and_then(Value::as_str);
            let mut out = String::new();
            let mut first = true;
            for v in types::array_values(txt(0), e)? {
                let piece = match &v {
                    Value::Null => match null_as {
                        Some(s) => s.to_owned(),
                        None => continue,
                    },
                    other => value::to_text(other),
                };
                if !first {
                    out.push_str(txt(1));
                }
                first = false;
                out.push_str(&piece);
            }
            return Ok(Value::Text(out));
        }
        SysFunc::ArrayUpper(e) | SysFunc::ArrayLower(e) | SysFunc::ArrayLength(e) | SysFunc::Cardinality(e) => {
            let len = types::parse_array(txt(0), e)?.len();
            let len = i32::try_from(len).unwrap_or(i32::MAX);
            let dim_ok = matches!(f, SysFunc::Cardinality(_)) || int(1) == 1;
            if !dim_ok || (len == 0 && !matches!(f, SysFunc::Cardinality(_))) {
                return Ok(Value::Null);
            }
            let lower = if e.is_vector() { 0 } else { 1 };
            return Ok(Value::Int4(match f {
                SysFunc::ArrayUpper(_) => lower + len - 1,
                SysFunc::ArrayLower(_) => lower,
                _ => len,
            }));
        }
        SysFunc::Subscript(e) => {
            let items = types::array_values(txt(0), e)?;
            let lower = if e.is_vector() { 0 } else { 1 };
            let k = int(1) - lower;
            return Ok(usize::try_from(k).ok().and_then(|k| items.get(k).cloned()).unwrap_or(Value::Null));
        }
        SysFunc::MakeArray(e) => return Ok(Value::Text(types::array_text(e, vals))),
        _ => {}
    }
    eval_operators(f, vals)
}

/// PostgreSQL's int2shl/int4shl/int8shl (and shr) are C shifts on x86:
/// an int2 or int4 shifts as a 32-bit int, an int8 as 64 bits, and the
/// count is taken modulo that width (`1::int4 << 33` is 2); the result is
/// then truncated to the left side's type.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn shift(op: BitOp, ty: DataType, x: i64, y: i64) -> i64 {
    let left = op == BitOp::Shl;
    if ty == DataType::Int8 {
        let n = (y as u32) & 63;
        return if left { x.wrapping_shl(n) } else { x >> n };
    }
    let (x, n) = (x as i32, (y as u32) & 31);
    i64::from(if left { x.wrapping_shl(n) } else { x >> n })
}

/// Operators (`&` `|` `#`, ANY, regular expressions, ||), rows, array casts and oids.
fn eval_operators(f: SysFunc, vals: &[Value]) -> Result<Value> {
    let int = |k: usize| vals.get(k).and_then(Value::as_i64).unwrap_or(0);
    let txt = |k: usize| vals.get(k).and_then(Value::as_str).unwrap_or("");
    match f {
        SysFunc::Bit(op, ty) => {
            let (x, y) = (int(0), int(1));
            let r = match op {
                BitOp::And => x & y,
                BitOp::Or => x | y,
                BitOp::Xor => x ^ y,
                BitOp::Not => !x,
                BitOp::Shl | BitOp::Shr => shift(op, ty, x, y),
            };
            // In range: both operands are of `ty`.
            #[allow(clippy::cast_possible_truncation)]
            return Ok(match ty {
                DataType::Int2 => Value::Int2(r as i16),
                DataType::Int4 => Value::Int4(r as i32),
                _ => Value::Int8(r),
            });
        }
        // Integer fields only: their text needs no quoting in a row's form.
        SysFunc::ExpandRecord(_) => {
            let field = |v: &Value| if v.is_null() { String::new() } else { value::to_text(v) };
            return Ok(Value::Text(format!("({},{})", field(&vals[0]), field(&vals[1]))));
        }
        SysFunc::RecordField(e, k) => {
            let Some(row) = vals[0].as_str() else { return Ok(Value::Null) };
            let inner = row.strip_prefix('(').and_then(|r| r.strip_suffix(')')).unwrap_or("");
            let ty = if k == 0 { e.element_type() } else { DataType::Int4 };
            return match inner.split(',').nth(k) {
                None | Some("") => Ok(Value::Null),
                Some(text) => value::parse_input(text, ty),
            };
        }
        SysFunc::ArrayConcat(e) => {
            return Ok(match (&vals[0], &vals[1]) {
                (Value::Null, Value::Null) => Value::Null,
                (Value::Null, other) | (other, Value::Null) => other.clone(),
                (a, b) => {
                    let mut items = types::array_values(a.as_str().unwrap_or(""), e)?;
                    items.extend(types::array_values(b.as_str().unwrap_or(""), e)?);
                    Value::Text(types::array_text(e, &items))
                }
            });
        }
        SysFunc::ArrayCast(from, to) => {
            let items = types::array_values(txt(0), from)?;
            let cast =
                items.into_iter().map(|v| value::cast(v, to.element_type(), true)).collect::<Result<Vec<_>>>()?;
            return Ok(Value::Text(types::array_text(to, &cast)));
        }
        SysFunc::Any(op, e) => {
            let (lhs, arr) = (&vals[0], &vals[1]);
            if arr.is_null() {
                return Ok(Value::Null);
            }
            let items = types::array_values(arr.as_str().unwrap_or(""), e)?;
            if lhs.is_null() {
                return Ok(if items.is_empty() { Value::Bool(false) } else { Value::Null });
            }
            let mut unknown = false;
            for it in &items {
                match value::compare(lhs, it) {
                    Some(o) if op.holds(o) => return Ok(Value::Bool(true)),
                    None => unknown = true,
                    Some(_) => {}
                }
            }
            return Ok(if unknown { Value::Null } else { Value::Bool(false) });
        }
        SysFunc::Regex { negated, case_insensitive } => {
            if vals[0].is_null() || vals[1].is_null() {
                return Ok(Value::Null);
            }
            return Ok(Value::Bool(super::regex::is_match(txt(0), txt(1), case_insensitive)? != negated));
        }
        SysFunc::OidIn if !vals[0].is_null() => return Ok(Value::Int8(oid_in(txt(0))?)),
        SysFunc::OidFromInt(wide) if !vals[0].is_null() => return Ok(Value::Int8(oid_from_int(int(0), wide)?)),
        SysFunc::CharIn if !vals[0].is_null() => return Ok(Value::Text(types::char_from_text(txt(0)))),
        SysFunc::CharFromInt4 if !vals[0].is_null() => {
            let v = i32::try_from(int(0)).map_err(|_| SqlError::new("22003", "integer out of range"))?;
            return Ok(Value::Text(types::char_from_int4(v)?));
        }
        SysFunc::OidIn | SysFunc::OidFromInt(_) | SysFunc::CharIn | SysFunc::CharFromInt4 => {
            return Ok(Value::Null);
        }
        _ => {}
    }
    Ok(Value::Null)
}

/// The functions of the session's settings and user here, of the catalog's
/// objects in [`eval_objects`].
fn eval_catalog(f: SysFunc, vals: &[Value], ctx: SysCtx<'_>) -> Result<Value> {
    let int = |k: usize| vals.get(k).and_then(Value::as_i64).unwrap_or(0);
    let txt = |k: usize| vals.get(k).and_then(Value::as_str).unwrap_or("");
    let boolean = |k: usize| matches!(vals.get(k), Some(Value::Bool(true)));
    let catalog = ctx.catalog;
    Ok(match f {
        SysFunc::CurrentSetting => {
            if vals[0].is_null() {
                return Ok(Value::Null);
            }
            let key = txt(0).to_lowercase();
            match setting_value(ctx.settings, &key) {
                Some(v) => Value::Text(v),
                None if boolean(1) => Value::Null,
                None => {
                    return Err(SqlError::new("42704", format!("unrecognized configuration parameter \"{}\"", txt(0))));
                }
            }
        }
        SysFunc::SetConfig => {
            if boolean(2) {
                return Err(SqlError::unsupported("set_config(..., is_local => true)"));
            }
            let key = txt(0).to_lowercase();
            if !ctx.settings.contains_key(&key) {
                return Err(SqlError::new("42704", format!("unrecognized configuration parameter \"{}\"", txt(0))));
            }
            if READ_ONLY_SETTINGS.contains(&key.as_str()) {
                return Err(SqlError::new("55P02", format!("parameter \"{key}\" cannot be changed")));
            }
            // Who the session is changes only through SET ROLE / SET
            // SESSION AUTHORIZATION, which check the role.
            if matches!(key.as_str(), "role" | "session_authorization") {
                return Err(SqlError::unsupported(format!("set_config('{key}', ...)")));
            }
            if crate::settings::SUPERUSER_SETTINGS.contains(&key.as_str())
                && !crate::catalog::roles::session_is_superuser(catalog, ctx.settings)?
            {
                return Err(SqlError::new("42501", format!("permission denied to set parameter \"{key}\"")));
            }
            let v = normalize_setting(&key, txt(1))?;
            ctx.settings.set(&key, v.clone());
            Value::Text(v)
        }
        SysFunc::CurrentDatabase => Value::Text(ctx.database()),
        SysFunc::IsInRecovery => Value::Bool(ctx.standby),
        SysFunc::CurrentSchema => search_path_with(ctx.settings, |s| cat::user_schema_named(catalog, s).is_some())
            .into_iter()
            .next()
            .map_or(Value::Null, Value::Text),
        SysFunc::CurrentSchemas => {
            // With implicit schemas: the session's temporary schema (once
            // made) and pg_catalog where the path does not place them,
            // in the order names are looked up (fetch_search_path).
            let path = crate::catalog::path_of(catalog, ctx.settings);
            let names: Vec<Value> = if boolean(0) {
                path.lookup_order().map(|s| Value::Text(s.to_owned())).collect()
            } else {
                path.schemas.iter().cloned().map(Value::Text).collect()
            };
            Value::Text(types::array_text(Elem::Text, &names))
        }
        SysFunc::CurrentUser => Value::Text(crate::catalog::roles::current_role(ctx.settings).to_owned()),
        SysFunc::SessionUser => Value::Text(ctx.settings.get("session_authorization").cloned().unwrap_or_default()),
        SysFunc::HasPrivilege(which) => crate::catalog::roles::has_privilege(which, vals, catalog, ctx.settings)?,
        SysFunc::UserById => {
            let session = ctx.settings.get("session_authorization").cloned().unwrap_or_default();
            let shown = crate::catalog::roles::ShownRoles::of(catalog, &session);
            match shown.name(int(0)) {
                Some(n) => Value::Text(n.to_owned()),
                None => Value::Text(format!("unknown (OID={})", int(0))),
            }
        }
        _ => return eval_objects(f, vals, ctx),
    })
}

fn eval_objects(f: SysFunc, vals: &[Value], ctx: SysCtx<'_>) -> Result<Value> {
    let int = |k: usize| vals.get(k).and_then(Value::as_i64).unwrap_or(0);
    let txt = |k: usize| vals.get(k).and_then(Value::as_str).unwrap_or("");
    let boolean = |k: usize| matches!(vals.get(k), Some(Value::Bool(true)));
    let catalog = ctx.catalog;
    Ok(match f {
        SysFunc::IndexDef => match cat::index_by_oid(catalog, int(0)) {
            Some(i) => {
                let Some(t) = catalog.table(i.table) else { return Ok(Value::Null) };
                let col = if vals.len() > 1 { int(1) } else { 0 };
                if col > 0 {
                    let name = usize::try_from(col - 1)
                        .ok()
                        .and_then(|c| i.columns.iter().chain(&i.include).nth(c))
                        .map(|&c| quote_ident(&t.columns[c].name));
                    name.map_or(Value::Null, Value::Text)
                } else {
                    // The pretty form leaves out the schema of a visible table.
                    Value::Text(index_def(t, i, !boolean(2)))
                }
            }
            None => Value::Null,
        },
        SysFunc::PartKeyDef => {
            match cat::table_by_oid(catalog, int(0)).and_then(|t| cat::partitions::PartitionSpec::decode(t)) {
                Some(spec) => Value::Text(cat::partitions::partkeydef(&spec)),
                None => Value::Null,
            }
        }
        SysFunc::ViewDef => match cat::table_by_oid(catalog, int(0)).filter(|t| cat::is_view(t)) {
            Some(v) => Value::Text(cat::view_definition(catalog, v, vals.len() > 1 && boolean(1))?),
            None => Value::Null,
        },
        SysFunc::ViewDefByName => {
            let oid = reg_lookup(catalog, ctx.settings, RegKind::Class, txt(0))?;
            match cat::table_by_oid(catalog, oid).filter(|t| cat::is_view(t)) {
                Some(v) => Value::Text(cat::view_definition(catalog, v, vals.len() > 1 && boolean(1))?),
                None => Value::Null,
            }
        }
        SysFunc::ConstraintDef => match cat::constraint_by_oid(catalog, int(0)) {
            Some(c) => Value::Text(constraint_def(catalog, &c, boolean(1))),
            None => return Err(SqlError::new("XX000", format!("cache lookup failed for constraint {}", int(0)))),
        },
        SysFunc::FunctionInfo(which) => crate::catalog::functions::function_info(catalog, int(0), which),
        SysFunc::TableIsVisible => {
            let oid = int(0);
            let stored = cat::table_by_oid(catalog, oid)
                .map(|t| t.name.clone())
                .or_else(|| cat::index_by_oid(catalog, oid).map(|i| i.name.clone()));
            if let Some(n) = stored {
                // Visible: its unqualified name finds it through the path.
                let unqualified = quote_ident(crate::names::short(&n));
                Value::Bool(reg_lookup(catalog, ctx.settings, RegKind::Class, &unqualified).is_ok_and(|o| o == oid))
            } else if let Some(r) = RELATIONS.iter().find(|r| r.oid == oid) {
                Value::Bool(r.schema == Schema::PgCatalog)
            } else {
                Value::Null
            }
        }
        SysFunc::RelationIsPublishable => Value::Bool(cat::table_by_oid(catalog, int(0)).is_some()),
        SysFunc::SerialSequence => serial_sequence(catalog, ctx.settings, txt(0), txt(1))?,
        SysFunc::RegOut(kind) => Value::Text(reg_name(catalog, ctx.settings, kind, int(0))),
        SysFunc::RegIn(kind, missing_ok) => match reg_lookup(catalog, ctx.settings, kind, txt(0)) {
            Ok(oid) => Value::Int8(oid),
            Err(_) if missing_ok => Value::Null,
            Err(e) => return Err(e),
        },
        _ => Value::Null,
    })
}

/// The sequence a serial or identity column owns, schema-qualified; NULL
/// for other columns (PostgreSQL's pg_get_serial_sequence).
fn serial_sequence(catalog: &Catalog, settings: &HashMap<String, String>, table: &str, column: &str) -> Result<Value> {
    let oid = reg_lookup(catalog, settings, RegKind::Class, table)?;
    let Some(t) = cat::table_by_oid(catalog, oid) else { return Ok(Value::Null) };
    let col = t
        .columns
        .iter()
        .filter(|c| !c.is_hidden())
        .find(|c| c.name == column.to_lowercase() || format!("\"{}\"", c.name) == column);
    let Some(col) = col else {
        return Err(SqlError::new("42703", format!("column \"{column}\" of relation \"{}\" does not exist", t.name)));
    };
    Ok(match col.sequence.filter(|(_, how)| how.owns()).and_then(|(seq, _)| catalog.table(seq)) {
        Some(seq) => {
            let (schema, name) = crate::names::split(&seq.name);
            Value::Text(format!("{}.{}", quote_ident(schema), quote_ident(name)))
        }
        // A cached column: PostgreSQL's sequence, schema-qualified as PostgreSQL gives it.
        None => match cat::backend_key(col) {
            Some(key) => Value::Text(pgtier_cache::KeyDefault::sequence_key(&key.sequence)),
            None => Value::Null,
        },
    })
}

/// oidin: an unsigned 32-bit number; negative input down to -2^31 wraps,
/// as PostgreSQL's `'-1'::oid` is 4294967295.
pub fn oid_in(text: &str) -> crate::error::Result<i64> {
    let t = text.trim();
    let n: i64 = t.parse().map_err(|_| SqlError::invalid_text("oid", text))?;
    if !(i64::from(i32::MIN)..=i64::from(u32::MAX)).contains(&n) {
        return Err(SqlError::new("22003", format!("value \"{text}\" is out of range for type oid")));
    }
    Ok(if n < 0 { n + (1i64 << 32) } else { n })
}

/// An integer cast to oid: int8 is range-checked (i8tooid), int4 and int2
/// are reinterpreted as unsigned (a binary-coercible cast).
fn oid_from_int(n: i64, wide: bool) -> crate::error::Result<i64> {
    if wide {
        return if (0..=i64::from(u32::MAX)).contains(&n) {
            Ok(n)
        } else {
            Err(SqlError::new("22003", "OID out of range"))
        };
    }
    Ok(if n < 0 { n + (1i64 << 32) } else { n })
}
