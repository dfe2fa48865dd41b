//! Binding of the system functions.

use pgtier_engine::DataType;

use crate::types::{Elem, RegKind};
use crate::bind::Ty;
use crate::error::{Result, SqlError};
use crate::expr::{Expr, Func, SeqFunc, SysFunc};
use crate::value;

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
