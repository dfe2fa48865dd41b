//! The functions drivers and psql call on the system catalogs and the
//! session (version(), current_setting, format_type, pg_get_indexdef, ...),
//! the array helpers they need, regular-expression matches, and the
//! `reg*` input/output conversions. Bound by [`bind_function`], evaluated by
//! [`eval`] with the catalog snapshot and settings from [`super::SysCtx`].

use pgtier_engine::{Catalog, DataType, IndexSchema, TableSchema, Value};

use super::catalog::{self as cat, ConstraintRef, RELATIONS, Schema, SystemRel};
use super::types::{self, Elem, RegKind};
use crate::bind::Ty;
use crate::error::{Result, SqlError};
use crate::expr::{CmpOp, Env, Expr, Func, SubqueryRunner};
use crate::value;

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
    ConstraintDef,
    GetExpr,
    UserById,
    TableIsVisible,
    TypeIsVisible,
    /// obj_description, col_description, ...: pgtier keeps no comments.
    NoDescription,
    EncodingToChar,
    /// has_*_privilege, pg_has_role: the one user owns everything.
    HasPrivilege,
    RelationIsPublishable,
    /// Functions about objects pgtier never has (triggers, statistics
    /// objects, views, sequences): NULL, as PostgreSQL answers for a
    /// missing object.
    NullResult,
    IsInRecovery,
    QuoteIdent,
    /// An oid that prints as a name.
    RegOut(RegKind),
    /// Text to oid by name lookup; `to_regclass` (missing_ok) yields NULL.
    RegIn(RegKind, bool),
    ArrayToString(Elem),
    ArrayUpper(Elem),
    ArrayLower(Elem),
    ArrayLength(Elem),
    Cardinality(Elem),
    Subscript(Elem),
    MakeArray(Elem),
    /// `array || array`.
    ArrayConcat(Elem),
    /// Between array/vector types (`int2vector::int2[]`).
    ArrayCast(Elem, Elem),
    /// `lhs op ANY (array)`.
    Any(CmpOp, Elem),
    Regex { negated: bool, case_insensitive: bool },
    /// nextval, currval, setval, lastval: evaluated by the executor
    /// ([`SubqueryRunner::sequence`]), which holds the transaction.
    Sequence(SeqFunc),
    /// `pg_get_serial_sequence(table, column)`.
    SerialSequence,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqFunc {
    Nextval,
    Currval,
    /// `setval(seq, value [, is_called])`.
    Setval,
    Lastval,
}

/// Binds a system function call; None if `name` is not one.
pub fn bind_function(
    name: &str, args: Vec<(Expr, Ty)>, coerce: &mut dyn FnMut(Expr, Ty, DataType) -> Result<Expr>,
) -> Result<Option<(Expr, Ty)>> {
    use DataType::{Bool, Int4, Int8, Text};
    let n = args.len();
    let sig = {
        let types: Vec<&str> = args.iter().map(|(_, t)| t.map_or("unknown", value::type_name)).collect();
        format!("{name}({})", types.join(", "))
    };
    let bad = || SqlError::undefined_function(&sig);
    let array_arg = |k: usize| -> Option<Elem> { args.get(k).and_then(|a| a.1).and_then(Elem::of) };
    let (f, want, ret): (SysFunc, Vec<DataType>, DataType) = match (name, n) {
        ("version", 0) => (SysFunc::Version, vec![], Text),
        ("current_setting", 1) => (SysFunc::CurrentSetting, vec![Text], Text),
        ("current_setting", 2) => (SysFunc::CurrentSetting, vec![Text, Bool], Text),
        ("set_config", 3) => (SysFunc::SetConfig, vec![Text, Text, Bool], Text),
        ("current_database" | "current_catalog", 0) => (SysFunc::CurrentDatabase, vec![], Text),
        ("current_schema", 0) => (SysFunc::CurrentSchema, vec![], Text),
        ("current_schemas", 1) => (SysFunc::CurrentSchemas, vec![Bool], Elem::Text.data_type()),
        ("current_user" | "session_user" | "user" | "current_role" | "getpgusername", 0) => (SysFunc::CurrentUser, vec![], Text),
        ("pg_backend_pid", 0) => (SysFunc::BackendPid, vec![], Int4),
        ("format_type", 2) => (SysFunc::FormatType, vec![Int8, Int4], Text),
        ("pg_get_indexdef", 1) => (SysFunc::IndexDef, vec![Int8], Text),
        ("pg_get_indexdef", 3) => (SysFunc::IndexDef, vec![Int8, Int4, Bool], Text),
        ("pg_get_constraintdef", 1) => (SysFunc::ConstraintDef, vec![Int8], Text),
        ("pg_get_constraintdef", 2) => (SysFunc::ConstraintDef, vec![Int8, Bool], Text),
        ("pg_get_expr", 2) => (SysFunc::GetExpr, vec![Text, Int8], Text),
        ("pg_get_expr", 3) => (SysFunc::GetExpr, vec![Text, Int8, Bool], Text),
        ("pg_get_userbyid", 1) => (SysFunc::UserById, vec![Int8], Text),
        ("pg_table_is_visible", 1) => (SysFunc::TableIsVisible, vec![Int8], Bool),
        ("pg_type_is_visible", 1) => (SysFunc::TypeIsVisible, vec![Int8], Bool),
        ("obj_description", 1 | 2) | ("shobj_description", 2) | ("col_description", 2) => {
            (SysFunc::NoDescription, vec![Int8, if name == "col_description" { Int4 } else { Text }], Text)
        }
        ("pg_encoding_to_char", 1) => (SysFunc::EncodingToChar, vec![Int4], Text),
        ("has_table_privilege" | "has_schema_privilege" | "has_database_privilege" | "has_any_column_privilege" | "pg_has_role", 2 | 3) => {
            (SysFunc::HasPrivilege, vec![Text; n], Bool)
        }
        ("has_column_privilege", 3 | 4) => (SysFunc::HasPrivilege, vec![Text; n], Bool),
        ("pg_relation_is_publishable", 1) => (SysFunc::RelationIsPublishable, vec![Int8], Bool),
        ("pg_get_statisticsobjdef_columns" | "pg_get_triggerdef" | "pg_get_viewdef" | "pg_get_partkeydef" | "pg_get_ruledef", 1 | 2) => {
            (SysFunc::NullResult, vec![Int8; n], Text)
        }
        ("pg_get_serial_sequence", 2) => (SysFunc::SerialSequence, vec![Text, Text], Text),
        ("nextval", 1) => (SysFunc::Sequence(SeqFunc::Nextval), vec![RegKind::Class.data_type()], Int8),
        ("currval", 1) => (SysFunc::Sequence(SeqFunc::Currval), vec![RegKind::Class.data_type()], Int8),
        ("setval", 2) => (SysFunc::Sequence(SeqFunc::Setval), vec![RegKind::Class.data_type(), Int8], Int8),
        ("setval", 3) => (SysFunc::Sequence(SeqFunc::Setval), vec![RegKind::Class.data_type(), Int8, Bool], Int8),
        ("lastval", 0) => (SysFunc::Sequence(SeqFunc::Lastval), vec![], Int8),
        // pg_proc is empty: no function is there to describe.
        ("pg_get_function_result" | "pg_get_function_arguments" | "pg_get_function_identity_arguments", 1) => (SysFunc::NullResult, vec![Int8], Text),
        ("pg_function_is_visible", 1) => (SysFunc::NullResult, vec![Int8], Bool),
        ("pg_is_in_recovery", 0) => (SysFunc::IsInRecovery, vec![], Bool),
        ("quote_ident", 1) => (SysFunc::QuoteIdent, vec![Text], Text),
        // pgtier has no partitioning: no relation has a partition root.
        ("pg_partition_root", 1) => (SysFunc::NullResult, vec![Int8], RegKind::Class.data_type()),
        ("to_regclass", 1) => (SysFunc::RegIn(RegKind::Class, true), vec![Text], RegKind::Class.data_type()),
        ("to_regtype", 1) => (SysFunc::RegIn(RegKind::Type, true), vec![Text], RegKind::Type.data_type()),
        ("to_regnamespace", 1) => (SysFunc::RegIn(RegKind::Namespace, true), vec![Text], RegKind::Namespace.data_type()),
        ("array_to_string", 2 | 3) => {
            let e = array_arg(0).ok_or_else(bad)?;
            (SysFunc::ArrayToString(e), vec![e.data_type(), Text, Text][..n].to_vec(), Text)
        }
        ("array_upper" | "array_lower" | "array_length", 2) => {
            let e = array_arg(0).ok_or_else(bad)?;
            let f = match name {
                "array_upper" => SysFunc::ArrayUpper(e),
                "array_lower" => SysFunc::ArrayLower(e),
                _ => SysFunc::ArrayLength(e),
            };
            (f, vec![e.data_type(), Int4], Int4)
        }
        ("cardinality", 1) => {
            let e = array_arg(0).ok_or_else(bad)?;
            (SysFunc::Cardinality(e), vec![e.data_type()], Int4)
        }
        ("pg_table_size" | "pg_relation_size" | "pg_total_relation_size" | "pg_indexes_size" | "pg_database_size", _) => {
            return Err(SqlError::unsupported(format!("{name}(): pgtier keeps no relation files to measure")));
        }
        _ => return Ok(None),
    };
    let mut out = Vec::with_capacity(n);
    if f == SysFunc::NullResult {
        // Never looks at its arguments: any types do.
        for (e, t) in args {
            out.push(if t.is_none() { coerce(e, None, Text)? } else { e });
        }
        return Ok(Some((Expr::Func(Func::Sys(f), out), Some(ret))));
    }
    for ((e, t), w) in args.into_iter().zip(want) {
        out.push(match t {
            Some(t) if t == w => e,
            _ if RegKind::of(w).is_some() => coerce(e, t, w)?,
            Some(t) if RegKind::of(t).is_some() && w == Int8 => e,
            Some(t) if value::category(t) == value::category(w) && Elem::of(t).is_none() && Elem::of(w).is_none() => {
                if w == Text { e } else { Expr::Cast(e.boxed(), w, false) }
            }
            None => coerce(e, None, w)?,
            Some(_) => return Err(bad()),
        });
    }
    Ok(Some((Expr::Func(Func::Sys(f), out), Some(ret))))
}

/// Evaluates a system function.
pub fn eval(f: SysFunc, args: &[Expr], env: &Env<'_>, sq: &mut dyn SubqueryRunner, row: &[Value]) -> Result<Value> {
    let mut vals = Vec::with_capacity(args.len());
    for a in args {
        vals.push(a.eval(env, sq, row)?);
    }
    let strict = !matches!(
        f,
        SysFunc::CurrentSetting | SysFunc::ArrayToString(_) | SysFunc::MakeArray(_) | SysFunc::Any(..) | SysFunc::FormatType | SysFunc::ArrayConcat(_)
    );
    if strict && vals.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let int = |k: usize| vals.get(k).and_then(Value::as_i64).unwrap_or(0);
    let txt = |k: usize| vals.get(k).and_then(Value::as_str).unwrap_or("");
    let boolean = |k: usize| matches!(vals.get(k), Some(Value::Bool(true)));
    // Pure functions first: they need no catalog.
    match f {
        SysFunc::Sequence(call) => return sq.sequence(call, &vals),
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
            return Ok(Value::Text(match int(0) {
                0 => "SQL_ASCII",
                6 => "UTF8",
                _ => "",
            }.to_owned()));
        }
        SysFunc::HasPrivilege => return Ok(Value::Bool(true)),
        SysFunc::IsInRecovery => return Ok(Value::Bool(false)),
        SysFunc::QuoteIdent => return Ok(Value::Text(quote_ident(txt(0)))),
        SysFunc::TypeIsVisible => return Ok(if cat::type_by_oid(int(0)).is_some() { Value::Bool(true) } else { Value::Null }),
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
        SysFunc::MakeArray(e) => return Ok(Value::Text(types::array_text(e, &vals))),
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
            let cast = items.into_iter().map(|v| value::cast(v, to.element_type(), true)).collect::<Result<Vec<_>>>()?;
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
        SysFunc::Regex { negated, case_insensitive } => return Ok(Value::Bool(regex_match(txt(0), txt(1), case_insensitive)? != negated)),
        _ => {}
    }
    let Some(ctx) = sq.system() else {
        return Err(SqlError::new("0A000", "system functions are not supported in this context"));
    };
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
                None => return Err(SqlError::new("42704", format!("unrecognized configuration parameter \"{}\"", txt(0)))),
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
            if crate::session::READ_ONLY_SETTINGS.contains(&key.as_str()) {
                return Err(SqlError::new("55P02", format!("parameter \"{key}\" cannot be changed")));
            }
            let v = crate::session::normalize_setting(&key, txt(1))?;
            ctx.settings.insert(key, v.clone());
            Value::Text(v)
        }
        SysFunc::CurrentDatabase => Value::Text(cat::database(&ctx)),
        SysFunc::CurrentSchema => search_path(ctx.settings).into_iter().next().map_or(Value::Null, Value::Text),
        SysFunc::CurrentSchemas => {
            let mut names: Vec<Value> = Vec::new();
            let explicit = search_path(ctx.settings);
            if boolean(0) && !explicit.iter().any(|s| s == "pg_catalog") {
                names.push(Value::Text("pg_catalog".into()));
            }
            names.extend(explicit.into_iter().map(Value::Text));
            Value::Text(types::array_text(Elem::Text, &names))
        }
        SysFunc::CurrentUser => Value::Text(ctx.settings.get("session_authorization").cloned().unwrap_or_default()),
        SysFunc::UserById => {
            if int(0) == cat::OWNER_OID {
                Value::Text(ctx.settings.get("session_authorization").cloned().unwrap_or_default())
            } else if int(0) == cat::DATABASE_OWNER_ROLE {
                Value::Text("pg_database_owner".into())
            } else {
                Value::Text(format!("unknown (OID={})", int(0)))
            }
        }
        SysFunc::IndexDef => match cat::index_by_oid(catalog, int(0)) {
            Some(i) => {
                let Some(t) = catalog.table(i.table) else { return Ok(Value::Null) };
                let col = if vals.len() > 1 { int(1) } else { 0 };
                if col > 0 {
                    let name = usize::try_from(col - 1).ok().and_then(|c| i.columns.get(c)).map(|&c| quote_ident(&t.columns[c].name));
                    name.map_or(Value::Null, Value::Text)
                } else {
                    // The pretty form leaves out the schema of a visible table.
                    Value::Text(index_def(t, i, !boolean(2)))
                }
            }
            None => Value::Null,
        },
        SysFunc::ConstraintDef => match cat::constraint_by_oid(catalog, int(0)) {
            Some(c) => Value::Text(constraint_def(catalog, &c, boolean(1))),
            None => return Err(SqlError::new("XX000", format!("cache lookup failed for constraint {}", int(0)))),
        },
        SysFunc::TableIsVisible => {
            let oid = int(0);
            if cat::table_by_oid(catalog, oid).is_some() || cat::index_by_oid(catalog, oid).is_some() {
                Value::Bool(search_path(ctx.settings).iter().any(|s| s == "public"))
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

fn setting_value(settings: &std::collections::HashMap<String, String>, key: &str) -> Option<String> {
    let key = match key {
        "time zone" => "timezone",
        other => other,
    };
    if let Some(v) = settings.get(key) {
        return Some(v.clone());
    }
    FIXED_SETTINGS.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_owned())
}

/// Read-only settings with fixed values (current_setting, pg_settings).
pub const FIXED_SETTINGS: &[(&str, &str)] = &[
    ("block_size", "8192"),
    ("data_directory_mode", "0700"),
    ("lc_collate", "C"),
    ("lc_ctype", "C"),
    ("max_connections", "100"),
    ("max_identifier_length", "63"),
    ("max_index_keys", "32"),
    ("server_version_num", "150000"),
];

/// The name PostgreSQL shows for a setting (`DateStyle`, `TimeZone`).
pub fn setting_display_name(key: &str) -> &str {
    match key {
        "datestyle" => "DateStyle",
        "timezone" => "TimeZone",
        "intervalstyle" => "IntervalStyle",
        other => other,
    }
}

/// Schemas of the search path that exist (`$user` never does here).
fn search_path(settings: &std::collections::HashMap<String, String>) -> Vec<String> {
    let path = settings.get("search_path").cloned().unwrap_or_default();
    path.split(',')
        .map(|s| s.trim().trim_matches('"').to_owned())
        .filter(|s| matches!(s.as_str(), "public" | "pg_catalog" | "information_schema"))
        .collect()
}

/// A name as an SQL identifier, quoted when PostgreSQL would.
pub fn quote_ident(s: &str) -> String {
    let plain = s.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !is_reserved(s);
    if plain { s.to_owned() } else { format!("\"{}\"", s.replace('"', "\"\"")) }
}

fn is_reserved(s: &str) -> bool {
    const RESERVED: &[&str] = &[
        "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric", "both", "case", "cast", "check", "collate", "column",
        "constraint", "create", "current_catalog", "current_date", "current_role", "current_time", "current_timestamp", "current_user",
        "default", "deferrable", "desc", "distinct", "do", "else", "end", "except", "false", "fetch", "for", "foreign", "from", "grant",
        "group", "having", "in", "initially", "intersect", "into", "lateral", "leading", "limit", "localtime", "localtimestamp", "not",
        "null", "offset", "on", "only", "or", "order", "placing", "primary", "references", "returning", "select", "session_user", "some",
        "symmetric", "table", "then", "to", "trailing", "true", "union", "unique", "user", "using", "variadic", "when", "where", "window",
        "with",
    ];
    RESERVED.contains(&s)
}

/// `format_type(oid, typmod)`; `typmod` None is SQL NULL.
pub fn format_type(oid: i64, typmod: Option<i64>) -> String {
    let Some((_, row, is_array)) = cat::type_by_oid(oid) else { return "???".into() };
    let base_oid = row.0;
    let tm = typmod.filter(|m| *m >= 0);
    let base = match base_oid {
        16 => "boolean".to_owned(),
        18 => "\"char\"".to_owned(),
        20 => "bigint".to_owned(),
        21 => "smallint".to_owned(),
        23 => "integer".to_owned(),
        700 => "real".to_owned(),
        701 => "double precision".to_owned(),
        1042 => match tm {
            Some(m) => format!("character({})", m - 4),
            None if typmod.is_none() || is_array => "character".to_owned(),
            None => "bpchar".to_owned(),
        },
        1043 => match tm {
            Some(m) => format!("character varying({})", m - 4),
            None => "character varying".to_owned(),
        },
        1700 => match tm {
            Some(m) => format!("numeric({},{})", ((m - 4) >> 16) & 0xffff, (m - 4) & 0xffff),
            None => "numeric".to_owned(),
        },
        1114 => match tm {
            Some(p) => format!("timestamp({p}) without time zone"),
            None => "timestamp without time zone".to_owned(),
        },
        1184 => match tm {
            Some(p) => format!("timestamp({p}) with time zone"),
            None => "timestamp with time zone".to_owned(),
        },
        1083 => "time without time zone".to_owned(),
        _ => row.1.to_owned(),
    };
    if is_array { format!("{base}[]") } else { base }
}

fn column_list(t: &TableSchema, cols: &[usize]) -> String {
    cols.iter().map(|&c| quote_ident(&t.columns[c].name)).collect::<Vec<_>>().join(", ")
}

/// `pg_get_indexdef`: `CREATE UNIQUE INDEX t_pkey ON public.t USING btree (id)`.
pub fn index_def(t: &TableSchema, i: &IndexSchema, qualified: bool) -> String {
    format!(
        "CREATE {}INDEX {} ON {}{} USING btree ({})",
        if i.unique { "UNIQUE " } else { "" },
        quote_ident(&i.name),
        if qualified { "public." } else { "" },
        quote_ident(&t.name),
        column_list(t, &i.columns)
    )
}

/// `pretty`: pg_get_constraintdef's second argument. A CHECK shows the
/// expression as it was written, one pair of parentheses more when not
/// pretty (PostgreSQL also parenthesizes each operator and shows implicit
/// casts there; for `col > 0` the two agree).
fn constraint_def(catalog: &Catalog, c: &ConstraintRef, pretty: bool) -> String {
    match c {
        ConstraintRef::Index(i) => {
            let Some(t) = catalog.table(i.table) else { return String::new() };
            format!("{} ({})", if i.primary { "PRIMARY KEY" } else { "UNIQUE" }, column_list(t, &i.columns))
        }
        ConstraintRef::Foreign(f) => {
            let (Some(child), Some(parent)) = (catalog.table(f.child), catalog.table(f.parent)) else { return String::new() };
            let action = match f.on_delete {
                pgtier_engine::FkAction::NoAction => "",
                pgtier_engine::FkAction::Cascade => " ON DELETE CASCADE",
                pgtier_engine::FkAction::SetNull => " ON DELETE SET NULL",
            };
            format!("FOREIGN KEY ({}) REFERENCES {}({}){action}", column_list(child, &f.child_columns), quote_ident(&parent.name), column_list(parent, &f.parent_columns))
        }
        ConstraintRef::Check(t, k) => {
            let sql = t.checks.get(*k).map_or("", |c| c.sql.as_str());
            if pretty { format!("CHECK ({sql})") } else { format!("CHECK (({sql}))") }
        }
    }
}

/// A column default as PostgreSQL deparses it (pg_get_expr of adbin). The
/// engine keeps the value coerced to the column type, so this shows the
/// value as if it had been written as a literal of that type: integers
/// and non-negative decimals bare, everything else quoted with a cast.
pub fn default_expr(v: &Value, ty: DataType) -> String {
    let quoted = |s: &str, t: &str| format!("'{}'::{t}", s.replace('\'', "''"));
    match v {
        Value::Null => format!("NULL::{}", ty.pg_name()),
        Value::Bool(b) => (if *b { "true" } else { "false" }).to_owned(),
        Value::Int2(_) | Value::Int4(_) | Value::Int8(_) => {
            let x = v.as_i64().unwrap_or(0);
            match (x >= 0, i32::try_from(x).is_ok()) {
                (true, true) => x.to_string(),
                (_, true) => quoted(&x.to_string(), "integer"),
                (_, false) => quoted(&x.to_string(), "bigint"),
            }
        }
        Value::Numeric(n) => {
            let n = value::numeric_normalize(*n);
            let s = n.to_string();
            if n.mantissa >= 0 && (n.scale > 0 || i32::try_from(n.mantissa).is_ok()) {
                s
            } else if n.scale == 0 && i64::try_from(n.mantissa).is_ok() {
                quoted(&s, if i32::try_from(n.mantissa).is_ok() { "integer" } else { "bigint" })
            } else {
                quoted(&s, "numeric")
            }
        }
        Value::Float4(_) | Value::Float8(_) => {
            let s = value::to_text(v);
            if s.starts_with('-') || s.contains(['e', 'N', 'I']) { quoted(&s, "double precision") } else { s }
        }
        Value::Text(s) => {
            let t = match ty {
                DataType::Varchar(_) => "character varying",
                DataType::Char(_) => "bpchar",
                _ => "text",
            };
            let s = if matches!(ty, DataType::Char(_)) { value::bpchar_trim(s) } else { s };
            quoted(s, t)
        }
        other => quoted(&value::to_text(other), ty.pg_name().split('(').next().unwrap_or("text")),
    }
}

fn reg_name(catalog: &Catalog, settings: &std::collections::HashMap<String, String>, kind: RegKind, oid: i64) -> String {
    let name = match kind {
        RegKind::Class => {
            let visible = search_path(settings).iter().any(|s| s == "public");
            let user = cat::table_by_oid(catalog, oid).map(|t| t.name.clone()).or_else(|| cat::index_by_oid(catalog, oid).map(|i| i.name.clone()));
            match user {
                Some(n) if visible => Some(quote_ident(&n)),
                Some(n) => Some(format!("public.{}", quote_ident(&n))),
                None => RELATIONS.iter().find(|r| r.oid == oid).map(|r| match r.schema {
                    Schema::PgCatalog => r.name.to_owned(),
                    Schema::InformationSchema => format!("information_schema.{}", r.name),
                }),
            }
        }
        RegKind::Type => cat::type_by_oid(oid).map(|_| format_type(oid, None)),
        RegKind::Namespace => cat::namespace_name(oid).map(str::to_owned),
        RegKind::Role => (oid == cat::OWNER_OID).then(|| settings.get("session_authorization").cloned().unwrap_or_default()),
    };
    name.unwrap_or_else(|| oid.to_string())
}

/// Splits `schema.name` (either part possibly double-quoted).
pub fn split_qualified(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = text.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            '"' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut cur)),
            c if quoted => cur.push(c),
            c => cur.push(c.to_ascii_lowercase()),
        }
    }
    parts.push(cur);
    parts
}

/// The sequence a serial or identity column owns, schema-qualified; NULL
/// for other columns (PostgreSQL's pg_get_serial_sequence).
fn serial_sequence(catalog: &Catalog, settings: &std::collections::HashMap<String, String>, table: &str, column: &str) -> Result<Value> {
    let oid = reg_lookup(catalog, settings, RegKind::Class, table)?;
    let Some(t) = cat::table_by_oid(catalog, oid) else { return Ok(Value::Null) };
    let col = t.columns.iter().filter(|c| !c.is_hidden()).find(|c| c.name == column.to_lowercase() || format!("\"{}\"", c.name) == column);
    let Some(col) = col else {
        return Err(SqlError::new("42703", format!("column \"{column}\" of relation \"{}\" does not exist", t.name)));
    };
    Ok(match col.sequence.filter(|(_, how)| how.owns()).and_then(|(seq, _)| catalog.table(seq)) {
        Some(seq) => Value::Text(format!("public.{}", quote_ident(&seq.name))),
        None => Value::Null,
    })
}

/// `'name'::regclass` and friends: the object's OID, or PostgreSQL's error.
pub fn reg_lookup(catalog: &Catalog, settings: &std::collections::HashMap<String, String>, kind: RegKind, text: &str) -> Result<i64> {
    let t = text.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        return t.parse::<i64>().map_err(|_| SqlError::invalid_text("oid", text));
    }
    match kind {
        RegKind::Class => {
            let parts = split_qualified(t);
            let (schema, name) = match parts.as_slice() {
                [n] => (None, n.as_str()),
                [s, n] => (Some(s.as_str()), n.as_str()),
                _ => return Err(SqlError::new("42601", format!("improper relation name (too many dotted names): {text}"))),
            };
            let missing = || SqlError::new("42P01", format!("relation \"{t}\" does not exist"));
            let system = |s: Schema| SystemRel::find(s, name).map(|r| r.def().oid);
            let user = || {
                catalog.table_by_name(name).map(|t| cat::table_oid(t)).or_else(|| catalog.index_by_name(name).map(|i| cat::index_oid(i)))
            };
            match schema {
                Some("pg_catalog") => system(Schema::PgCatalog).ok_or_else(missing),
                Some("information_schema") => system(Schema::InformationSchema).ok_or_else(missing),
                Some("public") => user().ok_or_else(missing),
                Some(s) => Err(SqlError::new("3F000", format!("schema \"{s}\" does not exist"))),
                None => system(Schema::PgCatalog).or_else(user).ok_or_else(missing),
            }
        }
        RegKind::Type => {
            let lowered = t.to_lowercase();
            cat::type_by_name(&lowered).ok_or_else(|| SqlError::new("42704", format!("type \"{t}\" does not exist")))
        }
        RegKind::Namespace => {
            let n = split_qualified(t).pop().unwrap_or_default();
            [cat::NS_PG_CATALOG, cat::NS_PUBLIC, cat::NS_INFORMATION_SCHEMA, cat::NS_PG_TOAST]
                .into_iter()
                .find(|o| cat::namespace_name(*o) == Some(n.as_str()))
                .ok_or_else(|| SqlError::new("3F000", format!("schema \"{t}\" does not exist")))
        }
        RegKind::Role => {
            if settings.get("session_authorization").is_some_and(|u| *u == t) {
                Ok(cat::OWNER_OID)
            } else {
                Err(SqlError::new("42704", format!("role \"{t}\" does not exist")))
            }
        }
    }
}

thread_local! {
    /// The last compiled pattern: a query matches one pattern against many rows.
    static LAST_REGEX: std::cell::RefCell<Option<(String, bool, regex_lite::Regex)>> = const { std::cell::RefCell::new(None) };
}

fn regex_match(s: &str, pattern: &str, case_insensitive: bool) -> Result<bool> {
    LAST_REGEX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let hit = matches!(&*slot, Some((p, ci, _)) if p == pattern && *ci == case_insensitive);
        if !hit {
            let re = regex_lite::RegexBuilder::new(pattern)
                .case_insensitive(case_insensitive)
                .build()
                .map_err(|e| SqlError::new("2201B", format!("invalid regular expression: {e}")))?;
            *slot = Some((pattern.to_owned(), case_insensitive, re));
        }
        Ok(slot.as_ref().is_some_and(|(_, _, re)| re.is_match(s)))
    })
}


/// The result of string_agg / array_agg over the collected values.
pub fn finish_collect(call: &crate::plan::AggCall, items: Vec<Value>) -> Result<Value> {
    if items.is_empty() {
        return Ok(Value::Null);
    }
    if call.func == crate::plan::AggFunc::ArrayAgg {
        let elem = Elem::of(call.ty).ok_or_else(|| SqlError::new("XX000", "array_agg without an array type"))?;
        return Ok(Value::Text(types::array_text(elem, &items)));
    }
    let mut out: Option<String> = None;
    for pair in items {
        let parts = types::parse_array(pair.as_str().unwrap_or("{}"), Elem::Text)?;
        let (Some(Some(v)), Some(d)) = (parts.first(), parts.get(1)) else { continue };
        match &mut out {
            None => out = Some(v.clone()),
            Some(s) => {
                if let Some(d) = d {
                    s.push_str(d);
                }
                s.push_str(v);
            }
        }
    }
    Ok(out.map_or(Value::Null, Value::Text))
}
