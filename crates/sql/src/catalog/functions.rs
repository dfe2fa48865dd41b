//! Functions made with CREATE FUNCTION, kept as schemas are (schemas.rs):
//! one engine table without rows per function, under a name no SQL
//! identifier can spell (it starts with a NUL byte). The table's columns
//! are the function's argument types and, last, its return type (so the
//! engine stores the types); its annotation is a JSON document with the
//! rest (language, body, volatility, strictness, owner, argument names).
//! So CREATE / DROP FUNCTION are transactional, logged and recovered like
//! other DDL, CREATE OR REPLACE rewrites the annotation (the OID, the
//! table's, stays), and a plan that called a function depends on its
//! table: dropping or replacing it re-plans the statement.

use std::sync::Arc;

use pgtier_engine::{Catalog, ColumnDef, DataType, TableDef, TableSchema};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SqlError};

/// What a function's engine table name starts with.
const FUNC_MARK: &str = "\0pgtier_func\0";

/// The annotation's document (the engine table's columns hold the types).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FunctionDoc {
    /// `sql` or `plpgsql`.
    pub language: String,
    /// The body as written between the quotes (prosrc).
    pub body: String,
    /// `i`, `s` or `v` (provolatile).
    pub volatility: char,
    /// STRICT / RETURNS NULL ON NULL INPUT.
    pub strict: bool,
    pub owner: String,
    /// Argument names ("" for an unnamed one).
    pub arg_names: Vec<String>,
    /// RETURNS trigger (a PL/pgSQL trigger function; the engine table's
    /// return column is then a placeholder bool).
    #[serde(default)]
    pub trigger: bool,
}

/// A CREATE FUNCTION as bound.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionDef {
    pub name: String,
    pub args: Vec<DataType>,
    pub ret: DataType,
    /// Without the owner: the executor sets it.
    pub doc: FunctionDoc,
    pub replace: bool,
}

/// A function made with CREATE FUNCTION.
#[derive(Clone, Debug)]
pub struct UserFunction {
    pub name: String,
    pub args: Vec<DataType>,
    pub ret: DataType,
    pub doc: FunctionDoc,
    pub oid: i64,
    /// Its engine table: a plan calling it depends on it.
    pub table: Arc<TableSchema>,
}

impl UserFunction {
    /// `name(type, ...)` as PostgreSQL names a function in messages.
    pub fn signature(&self) -> String {
        let types: Vec<&str> = self.args.iter().map(|t| crate::value::type_name(*t)).collect();
        format!("{}({})", self.name, types.join(", "))
    }
}

/// The identity of an argument type: its OID (typmods do not count, as
/// in PostgreSQL's proargtypes).
pub fn type_identity(ty: DataType) -> i64 {
    super::column_type_info(ty).type_oid
}

/// The engine table name of function `name` over argument types `args`.
pub fn function_table_name(name: &str, args: &[DataType]) -> String {
    let oids: Vec<String> = args.iter().map(|t| type_identity(*t).to_string()).collect();
    format!("{FUNC_MARK}{name}\0{}", oids.join(","))
}

/// The engine table that stores a function.
pub fn function_table_def(name: &str, args: &[DataType], ret: DataType, doc: &FunctionDoc) -> Result<TableDef> {
    let mut cols: Vec<ColumnDef> =
        args.iter().enumerate().map(|(i, t)| ColumnDef::new(format!("a{}", i + 1), *t)).collect();
    cols.push(ColumnDef::new("ret", ret));
    let mut def = TableDef::new(function_table_name(name, args), cols, &[]);
    def.annotation = Some(encode(doc)?);
    Ok(def)
}

pub fn encode(doc: &FunctionDoc) -> Result<String> {
    serde_json::to_string(doc).map_err(|e| SqlError::new("XX000", format!("function document: {e}")))
}

/// True for the engine table of a function.
#[inline]
pub fn is_function(t: &TableSchema) -> bool {
    t.name.starts_with(FUNC_MARK)
}

fn user_function(t: &Arc<TableSchema>) -> Option<UserFunction> {
    let rest = t.name.strip_prefix(FUNC_MARK)?;
    let name = rest.split('\0').next()?.to_owned();
    let doc: FunctionDoc = serde_json::from_str(t.annotation.as_deref()?).ok()?;
    let (ret, args) = t.visible_columns().split_last()?;
    Some(UserFunction {
        name,
        args: args.iter().map(|c| c.ty).collect(),
        ret: ret.ty,
        doc,
        oid: super::table_oid(t),
        table: Arc::clone(t),
    })
}

/// Every function made with CREATE FUNCTION, in id order.
pub fn user_functions(catalog: &Catalog) -> Vec<UserFunction> {
    catalog.tables().filter(|t| is_function(t)).filter_map(user_function).collect()
}

/// The functions named `name` (its overloads).
pub fn functions_named(catalog: &Catalog, name: &str) -> Vec<UserFunction> {
    catalog
        .tables()
        .filter(|t| t.name.strip_prefix(FUNC_MARK).and_then(|r| r.split('\0').next()) == Some(name))
        .filter_map(user_function)
        .collect()
}

/// Function `name` over exactly `args`.
pub fn function_exact(catalog: &Catalog, name: &str, args: &[DataType]) -> Option<UserFunction> {
    catalog.table_by_name(&function_table_name(name, args)).and_then(user_function)
}

/// PostgreSQL's OID of language sql (plpgsql's differs per cluster).
const LANG_SQL_OID: i64 = 14;

/// pg_type's OID of the pseudo-type trigger.
const TRIGGER_TYPE_OID: i64 = 2279;

/// pg_proc's rows: the functions made with CREATE FUNCTION (the built-in
/// ones are not listed).
pub(super) fn proc_rows(catalog: &Catalog, shown: &super::roles::ShownRoles, out: &mut Vec<pgtier_engine::Value>) {
    use crate::value::types::{Elem, array_text};
    use pgtier_engine::Value as V;
    for f in user_functions(catalog) {
        let types: Vec<V> = f.args.iter().map(|t| V::Int8(type_identity(*t))).collect();
        let names = if f.doc.arg_names.iter().all(String::is_empty) {
            V::Null
        } else {
            let names: Vec<V> = f.doc.arg_names.iter().map(|n| V::Text(n.clone())).collect();
            V::Text(array_text(Elem::Text, &names))
        };
        let nargs = i16::try_from(f.args.len()).unwrap_or(i16::MAX);
        out.extend([
            V::Int8(f.oid),
            V::Text(f.name.clone()),
            V::Int8(super::NS_PUBLIC),
            V::Int8(shown.oid(&f.doc.owner)),
            V::Int8(LANG_SQL_OID),
            V::Float4(100.0),
            V::Float4(0.0),
            V::Int8(0),
            V::Text("-".into()),
            V::Text("f".into()),
            V::Bool(false),
            V::Bool(false),
            V::Bool(f.doc.strict),
            V::Bool(false),
            V::Text(f.doc.volatility.to_string()),
            V::Text("u".into()),
            V::Int2(nargs),
            V::Int2(0),
            V::Int8(if f.doc.trigger { TRIGGER_TYPE_OID } else { type_identity(f.ret) }),
            V::Text(array_text(Elem::OidVector, &types)),
            V::Null,
            V::Null,
            names,
            V::Null,
            V::Null,
            V::Text(f.doc.body.clone()),
            V::Null,
            V::Null,
            V::Null,
            V::Null,
        ]);
    }
}

/// What the pg_get_function_* functions and pg_function_is_visible tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FnInfo {
    Result,
    Arguments,
    IdentityArguments,
    IsVisible,
}

/// `which` of the function with `oid`; NULL for an oid that is none of
/// them, as PostgreSQL answers for a missing function.
pub fn function_info(catalog: &Catalog, oid: i64, which: FnInfo) -> pgtier_engine::Value {
    use pgtier_engine::Value as V;
    let Some(f) =
        catalog.tables().filter(|t| is_function(t)).find(|t| super::table_oid(t) == oid).and_then(user_function)
    else {
        return V::Null;
    };
    let type_text = |t: DataType| super::format_type(type_identity(t), None);
    match which {
        FnInfo::Result if f.doc.trigger => V::Text("trigger".into()),
        FnInfo::Result => V::Text(type_text(f.ret)),
        FnInfo::Arguments | FnInfo::IdentityArguments => {
            let args: Vec<String> =
                f.args
                    .iter()
                    .zip(&f.doc.arg_names)
                    .map(|(t, n)| {
                        if n.is_empty() {
                            type_text(*t)
                        } else {
                            format!("{} {}", super::quote_ident(n), type_text(*t))
                        }
                    })
                    .collect();
            V::Text(args.join(", "))
        }
        FnInfo::IsVisible => V::Bool(true),
    }
}
