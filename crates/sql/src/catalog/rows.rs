//! The rows of the pg_catalog relations.

use std::sync::Arc;

use pgtier_engine::{Catalog, Column, IndexSchema, SequenceDefault, TableSchema, Value};

use super::pg_type::{BUILTIN_TYPES, ColumnTypeInfo, TypeMatch, column_type_info, type_rows};
use super::relations::{SysColumn, T};
use super::roles::ShownRoles;
use super::views::is_view;
use super::{
    BTREE_AM, DATABASE_OID, DATABASE_OWNER_ROLE, DEFAULT_COLLATION, HEAP_AM, INDEX_BASE, NS_INFORMATION_SCHEMA,
    NS_PG_CATALOG, NS_PG_TOAST, NS_PUBLIC, OWNER_OID, RELATIONS, Schema, SysCtx, SystemRel, attrdef_oid, check_columns,
    check_oid, column_default_text, fk_oid, index_constraint_oid, index_def, index_oid, information_schema,
    namespace_oid, relation_oid, table_oid, type_by_oid,
};
use crate::catalog::search_path::namespace_oid as namespace_oid_of;
use crate::names::{short, split};
use crate::settings::{FIXED_SETTINGS, READ_ONLY_SETTINGS, setting_display_name};
use crate::value::types::{Elem, array_text};

pub(super) fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// Only the user's tables, in id order (stable output).
/// Tables (not sequences, which are engine tables too).
pub(super) fn user_tables(catalog: &Catalog) -> Vec<&Arc<TableSchema>> {
    catalog
        .tables()
        .filter(|t| t.sequence.is_none() && !is_view(t) && !super::schemas::is_schema(t) && !t.name.starts_with('\0'))
        .collect()
}

/// Views (engine tables too, see `views.rs`), in id order.
pub(super) fn user_views(catalog: &Catalog) -> Vec<&Arc<TableSchema>> {
    super::views::views(catalog).collect()
}

pub(super) fn user_sequences(catalog: &Catalog) -> impl Iterator<Item = &Arc<TableSchema>> {
    catalog.tables().filter(|t| t.sequence.is_some())
}

/// `pg_attribute.attidentity`: 'a' (ALWAYS), 'd' (BY DEFAULT) or ''.
fn identity_code(col: &Column) -> &'static str {
    match super::identity_kind(col) {
        Some(SequenceDefault::IdentityAlways) => "a",
        Some(SequenceDefault::IdentityByDefault) => "d",
        _ => "",
    }
}

/// The columns PostgreSQL would show, with their positions: not the
/// engine's hidden row id (`Column::is_hidden`), nor the key on it.
pub(super) fn user_columns(t: &TableSchema) -> impl Iterator<Item = (usize, &Column)> {
    t.columns.iter().enumerate().filter(|(_, c)| !c.is_hidden())
}

/// Indexes PostgreSQL would show (not the key on a hidden row id), by table.
pub(super) fn table_indexes(catalog: &Catalog, t: &TableSchema) -> Vec<Arc<IndexSchema>> {
    catalog.indexes_of(t.id).into_iter().filter(|i| !i.columns.iter().any(|&c| t.columns[c].is_hidden())).collect()
}

/// An index with the table it is on.
pub(super) struct TableIndex {
    pub(super) table: Arc<TableSchema>,
    pub(super) index: Arc<IndexSchema>,
}

pub(super) fn all_indexes(catalog: &Catalog) -> Vec<TableIndex> {
    let mut out = Vec::new();
    for t in catalog.tables() {
        for i in table_indexes(catalog, t) {
            out.push(TableIndex { table: t.clone(), index: i });
        }
    }
    out
}

/// `t`'s attribute numbers of `cols` (gaps of dropped columns counted).
fn int2vector(t: &TableSchema, cols: &[usize]) -> Value {
    let items: Vec<Value> = cols.iter().map(|&c| Value::Int2(t.attnum(c))).collect();
    Value::Text(array_text(Elem::Int2Vector, &items))
}
fn int2array(t: &TableSchema, cols: &[usize]) -> Value {
    let items: Vec<Value> = cols.iter().map(|&c| Value::Int2(t.attnum(c))).collect();
    Value::Text(array_text(Elem::Int2, &items))
}

pub(super) fn attnum(c: usize) -> i16 {
    i16::try_from(c + 1).unwrap_or(i16::MAX)
}

/// Appends the rows of `rel` (flat, one value per column).
pub fn rows(rel: SystemRel, ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let def = rel.def();
    let start = out.len();
    match def.schema {
        Schema::PgCatalog => pg_catalog_rows(def.name, ctx, out),
        Schema::InformationSchema => information_schema::rows(def.name, ctx, out),
    }
    debug_assert_eq!((out.len() - start) % def.columns.len(), 0, "{}: row width", def.name);
}

fn pg_catalog_rows(name: &str, ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let catalog = ctx.catalog;
    match name {
        "pg_namespace" => namespace_rows(ctx, out),
        "pg_class" => class_rows(ctx, out),
        "pg_attribute" => attribute_rows(catalog, out),
        "pg_type" => type_rows(out),
        "pg_index" => index_rows(catalog, out),
        "pg_constraint" => constraint_rows(catalog, out),
        "pg_sequence" => sequence_rows(catalog, out),
        "pg_depend" => depend_rows(catalog, out),
        "pg_attrdef" => attrdef_rows(catalog, out),
        "pg_am" => am_rows(out),
        "pg_database" => database_rows(ctx, out),
        "pg_roles" => roles_rows(ctx, out),
        "pg_user" => user_rows(ctx, out),
        "pg_authid" => authid_rows(ctx, out),
        "pg_auth_members" => auth_members_rows(ctx, out),
        "pg_settings" => settings_rows(ctx, out),
        "pg_collation" => collation_rows(out),
        "pg_tablespace" => tablespace_rows(out),
        "pg_extension" => extension_rows(out),
        "pg_tables" => tables_rows(ctx, out),
        "pg_rewrite" => rewrite_rows(catalog, out),
        "pg_views" => views_rows(ctx, out),
        "pg_indexes" => indexes_rows(catalog, out),
        "pg_inherits" => inherits_rows(catalog, out),
        "pg_proc" => super::functions::proc_rows(catalog, &ShownRoles::of(catalog, &ctx.user()), out),
        "pg_trigger" => super::triggers::trigger_rows(catalog, out),
        "pgtier_cache_groups"
        | "pgtier_cache_tables"
        | "pgtier_cache_stats"
        | "pgtier_cache_propagation"
        | "pgtier_cache_swt"
        | "pgtier_cache_autorefresh"
        | "pgtier_cache_lanes"
        | "pgtier_tier_stats" => {
            super::cache_views::rows(name, ctx.cache, out);
        }
        "pgtier_analytics_tables" => super::analytics::table_rows(catalog, ctx.analytics, out),
        "pgtier_column_compression" => super::analytics::compression_rows(ctx.analytics, out),
        // Always empty: pgtier has no such objects (role memberships, descriptions, inheritance,
        // policies, statistics objects, publications, triggers, enums, ranges,
        // built-in functions in pg_proc).
        _ => {}
    }
}

fn namespace_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let shown = ShownRoles::of(ctx.catalog, &ctx.user());
    let acl = |name: &str| shown.schema_acl(name).map_or(Value::Null, Value::Text);
    for (oid, name) in [
        (NS_PG_CATALOG, "pg_catalog"),
        (NS_PUBLIC, "public"),
        (NS_INFORMATION_SCHEMA, "information_schema"),
        (NS_PG_TOAST, "pg_toast"),
    ] {
        let owner = if oid == NS_PUBLIC { DATABASE_OWNER_ROLE } else { OWNER_OID };
        out.extend([Value::Int8(oid), text(name), Value::Int8(owner), acl(name)]);
    }
    for s in super::schemas::user_schemas(ctx.catalog) {
        let owner = match shown.oid(&s.owner) {
            0 => OWNER_OID,
            oid => oid,
        };
        let a = acl(&s.name);
        out.extend([Value::Int8(s.oid), Value::Text(s.name), Value::Int8(owner), a]);
    }
}

fn index_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    for TableIndex { table: t, index: i } in all_indexes(catalog) {
        let keys = i16::try_from(i.columns.len()).unwrap_or(i16::MAX);
        let all = i16::try_from(i.columns.len() + i.include.len()).unwrap_or(i16::MAX);
        let colls: Vec<Value> =
            i.columns.iter().map(|&c| Value::Int8(column_type_info(t.columns[c].ty).collation)).collect();
        let declared = |k: usize| i.options.keys.get(k).cloned().unwrap_or_default();
        let classes: Vec<Value> =
            (0..i.columns.len()).map(|k| Value::Int8(super::opclass_oid(declared(k).opclass.as_deref()))).collect();
        // pg_index.h's INDOPTION_DESC and INDOPTION_NULLS_FIRST bits.
        let opts: Vec<Value> = (0..i.columns.len())
            .map(|k| {
                let key = declared(k);
                Value::Int2(i16::from(key.descending) | i16::from(key.nulls_first) << 1)
            })
            .collect();
        out.extend([
            Value::Int8(index_oid(&i)),
            Value::Int8(table_oid(&t)),
            Value::Int2(all),
            Value::Int2(keys),
            Value::Bool(i.unique),
            Value::Bool(false),
            Value::Bool(i.primary),
            Value::Bool(false),
            Value::Bool(true),
            Value::Bool(false),
            Value::Bool(true),
            Value::Bool(false),
            Value::Bool(true),
            Value::Bool(true),
            Value::Bool(false),
            int2vector(&t, &[i.columns.as_slice(), &i.include].concat()),
            Value::Text(array_text(Elem::OidVector, &colls)),
            Value::Text(array_text(Elem::OidVector, &classes)),
            Value::Text(array_text(Elem::Int2Vector, &opts)),
            Value::Null,
            Value::Null,
        ]);
    }
}

fn sequence_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    for s in user_sequences(catalog) {
        let Some(o) = &s.sequence else { continue };
        out.extend([
            Value::Int8(table_oid(s)),
            Value::Int8(column_type_info(o.data_type).type_oid),
            Value::Int8(o.start),
            Value::Int8(o.increment),
            Value::Int8(o.max),
            Value::Int8(o.min),
            Value::Int8(1),
            Value::Bool(o.cycle),
        ]);
    }
}

fn depend_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    const PG_CLASS: i64 = 1259;
    for t in user_tables(catalog) {
        for (c, col) in user_columns(t) {
            if let Some((seq, how)) = col.sequence.filter(|(_, how)| how.owns()) {
                let deptype = if how == SequenceDefault::Serial { "a" } else { "i" };
                out.extend([
                    Value::Int8(PG_CLASS),
                    Value::Int8(relation_oid(seq)),
                    Value::Int4(0),
                    Value::Int8(PG_CLASS),
                    Value::Int8(table_oid(t)),
                    Value::Int4(i32::from(t.attnum(c))),
                    text(deptype),
                ]);
            }
        }
    }
}

fn attrdef_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    for t in user_tables(catalog) {
        for (c, col) in user_columns(t) {
            if let Some(d) = column_default_text(catalog, col) {
                out.extend([
                    Value::Int8(attrdef_oid(t, t.attnum(c).unsigned_abs().into())),
                    Value::Int8(table_oid(t)),
                    Value::Int2(t.attnum(c)),
                    Value::Text(d),
                ]);
            }
        }
    }
}

fn am_rows(out: &mut Vec<Value>) {
    out.extend([Value::Int8(HEAP_AM), text("heap"), text("heap_tableam_handler"), text("t")]);
    out.extend([Value::Int8(BTREE_AM), text("btree"), text("bthandler"), text("i")]);
    out.extend([Value::Int8(405), text("hash"), text("hashhandler"), text("i")]);
}

fn database_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    out.extend([
        Value::Int8(DATABASE_OID),
        Value::Text(ctx.database()),
        Value::Int8(OWNER_OID),
        Value::Int4(6),
        text("c"),
        Value::Bool(false),
        Value::Bool(true),
        Value::Int4(-1),
        Value::Int8(0),
        Value::Int8(1),
        Value::Int8(1663),
        text("C"),
        text("C"),
        Value::Null,
        Value::Null,
        Value::Null,
    ]);
}

/// rolvaliduntil as the session's TimeZone and DateStyle print it.
fn valid_until(r: &super::roles::Role) -> Value {
    r.valid_until.map_or(Value::Null, |us| Value::Text(crate::value::to_text(&Value::TimestampTz(us))))
}

fn roles_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let shown = ShownRoles::of(ctx.catalog, &ctx.user());
    for (name, oid, r) in &shown.roles {
        out.extend([
            Value::Text(name.clone()),
            Value::Bool(r.is_superuser()),
            Value::Bool(r.inherit),
            Value::Bool(r.createrole),
            Value::Bool(r.createdb),
            Value::Bool(r.login),
            Value::Bool(r.replication),
            Value::Int4(r.connection_limit),
            text("********"),
            valid_until(r),
            Value::Bool(r.bypassrls),
            Value::Null,
            Value::Int8(*oid),
        ]);
    }
}

fn user_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let shown = ShownRoles::of(ctx.catalog, &ctx.user());
    for (name, oid, r) in shown.roles.iter().filter(|(_, _, r)| r.login) {
        out.extend([
            Value::Text(name.clone()),
            Value::Int8(*oid),
            Value::Bool(r.createdb),
            Value::Bool(r.is_superuser()),
            Value::Bool(r.replication),
            Value::Bool(r.bypassrls),
            text("********"),
            valid_until(r),
            Value::Null,
        ]);
    }
}

/// pg_authid: the verifiers only for a superuser (PostgreSQL refuses the
/// table to others).
fn authid_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let shown = ShownRoles::of(ctx.catalog, &ctx.user());
    let role = super::roles::current_role(ctx.settings);
    let su = super::roles::superuser(ctx.settings.auth(), shown.doc.as_ref(), role);
    for (name, oid, r) in &shown.roles {
        out.extend([
            Value::Int8(*oid),
            Value::Text(name.clone()),
            Value::Bool(r.is_superuser()),
            Value::Bool(r.inherit),
            Value::Bool(r.createrole),
            Value::Bool(r.createdb),
            Value::Bool(r.login),
            Value::Bool(r.replication),
            Value::Bool(r.bypassrls),
            Value::Int4(r.connection_limit),
            if su { r.password.clone().map_or(Value::Null, Value::Text) } else { Value::Null },
            valid_until(r),
        ]);
    }
}

fn auth_members_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let shown = ShownRoles::of(ctx.catalog, &ctx.user());
    for (n, (role, member, grantor, admin)) in shown.memberships().into_iter().enumerate() {
        let oid = 20_000 + i64::try_from(n).unwrap_or(0);
        out.extend([
            Value::Int8(oid),
            Value::Int8(role),
            Value::Int8(member),
            Value::Int8(grantor),
            Value::Bool(admin),
        ]);
    }
}

fn settings_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let mut names: Vec<String> = ctx.settings.keys().filter(|k| !k.starts_with("pgtier.")).cloned().collect();
    // Fixed facts drivers read (pgJDBC: max_index_keys).
    names.extend(FIXED_SETTINGS.iter().map(|(k, _)| (*k).to_owned()));
    names.sort();
    names.dedup();
    for k in &names {
        let fixed = FIXED_SETTINGS.iter().find(|(f, _)| f == k).map(|(_, v)| (*v).to_owned());
        let v = ctx.settings.get(k).cloned().or_else(|| fixed.clone()).unwrap_or_default();
        let ro = READ_ONLY_SETTINGS.contains(&k.as_str()) || fixed.is_some();
        out.extend([
            text(setting_display_name(k)),
            Value::Text(v.clone()),
            Value::Null,
            text(""),
            text(""),
            Value::Null,
            text(if ro { "internal" } else { "user" }),
            text("string"),
            text("default"),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Text(v.clone()),
            Value::Text(v),
            Value::Null,
            Value::Null,
            Value::Bool(false),
        ]);
    }
}

fn collation_rows(out: &mut Vec<Value>) {
    for (oid, name, provider) in [(DEFAULT_COLLATION, "default", "d"), (950, "C", "c"), (951, "POSIX", "c")] {
        let coll = if provider == "d" { Value::Null } else { text(name) };
        out.extend([
            Value::Int8(oid),
            text(name),
            Value::Int8(NS_PG_CATALOG),
            Value::Int8(OWNER_OID),
            text(provider),
            Value::Bool(true),
            Value::Int4(-1),
            coll.clone(),
            coll,
            Value::Null,
            Value::Null,
        ]);
    }
}

fn tablespace_rows(out: &mut Vec<Value>) {
    for (oid, name) in [(1663, "pg_default"), (1664, "pg_global")] {
        out.extend([Value::Int8(oid), text(name), Value::Int8(OWNER_OID), Value::Null, Value::Null]);
    }
}

fn extension_rows(out: &mut Vec<Value>) {
    out.extend([
        Value::Int8(13_500),
        text("plpgsql"),
        Value::Int8(OWNER_OID),
        Value::Int8(NS_PG_CATALOG),
        Value::Bool(false),
        text("1.0"),
        Value::Null,
        Value::Null,
    ]);
}

fn tables_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let catalog = ctx.catalog;
    for t in user_tables(catalog) {
        out.extend([
            text(split(&t.name).0),
            text(short(&t.name)),
            Value::Text(ctx.user()),
            Value::Null,
            Value::Bool(true),
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(false),
        ]);
    }
}

/// Each view's one rule, as PostgreSQL keeps it (the query itself is not shown as a node tree).
fn rewrite_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    for v in user_views(catalog) {
        out.extend([
            Value::Int8(super::rewrite_oid(v)),
            text("_RETURN"),
            Value::Int8(table_oid(v)),
            text("1"),
            text("O"),
            Value::Bool(true),
            text("<>"),
            Value::Null,
        ]);
    }
}

fn views_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let catalog = ctx.catalog;
    for v in user_views(catalog) {
        let def = super::view_definition(catalog, v, false).map_or(Value::Null, Value::Text);
        out.extend([text(split(&v.name).0), text(short(&v.name)), Value::Text(ctx.user()), def]);
    }
}

fn indexes_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    for TableIndex { table: t, index: i } in all_indexes(catalog) {
        out.extend([
            text(split(&t.name).0),
            text(short(&t.name)),
            text(short(&i.name)),
            Value::Null,
            Value::Text(index_def(&t, &i, true)),
        ]);
    }
}

fn class_rows(ctx: &SysCtx<'_>, out: &mut Vec<Value>) {
    let catalog = ctx.catalog;
    let start = out.len();
    let shown = ShownRoles::of(catalog, &ctx.user());
    let mut push = |oid: i64,
                    name: &str,
                    ns: i64,
                    am: i64,
                    kind: &str,
                    natts: usize,
                    has_index: bool,
                    has_triggers: bool,
                    checks: usize| {
        out.extend([
            Value::Int8(oid),
            text(short(name)),
            Value::Int8(ns),
            Value::Int8(0),
            Value::Int8(0),
            Value::Int8(shown.relation_owner_oid(name)),
            Value::Int8(am),
            Value::Int8(if kind == "v" || kind == "p" { 0 } else { oid }),
            Value::Int8(0),
            Value::Int4(0),
            Value::Float4(-1.0),
            Value::Int4(0),
            Value::Int8(0),
            Value::Bool(has_index),
            Value::Bool(false),
            text(if crate::names::is_temp_schema(split(name).0) { "t" } else { "p" }),
            text(kind),
            Value::Int2(i16::try_from(natts).unwrap_or(i16::MAX)),
            Value::Int2(i16::try_from(checks).unwrap_or(i16::MAX)),
            Value::Bool(kind == "v"),
            Value::Bool(has_triggers),
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(true),
            text(if kind == "i" || kind == "S" || kind == "v" { "n" } else { "d" }),
            Value::Bool(false),
            Value::Int8(0),
            Value::Int8(0),
            Value::Int8(0),
            shown.relation_acl(name).map_or(Value::Null, Value::Text),
            Value::Null,
            Value::Null,
        ]);
    };
    for t in user_tables(catalog) {
        // PostgreSQL enforces foreign keys with (internal) triggers on both tables.
        let fk_triggers = !catalog.foreign_keys_of(t.id).is_empty()
            || !catalog.referencing(t.id).is_empty()
            || !super::triggers::triggers_of(catalog, &t.name).is_empty();
        push(
            table_oid(t),
            &t.name,
            namespace_oid_of(catalog, &t.name),
            if super::partitions::is_partitioned(t) { 0 } else { HEAP_AM },
            if super::partitions::is_partitioned(t) { "p" } else { "r" },
            user_columns(t).count(),
            !table_indexes(catalog, t).is_empty(),
            fk_triggers,
            t.checks.len(),
        );
    }
    for TableIndex { index: i, .. } in all_indexes(catalog) {
        push(
            index_oid(&i),
            &i.name,
            namespace_oid_of(catalog, &i.name),
            BTREE_AM,
            "i",
            i.columns.len() + i.include.len(),
            false,
            false,
            0,
        );
    }
    for s in user_sequences(catalog) {
        push(
            table_oid(s),
            &s.name,
            namespace_oid_of(catalog, &s.name),
            0,
            "S",
            user_columns(s).count(),
            false,
            false,
            0,
        );
    }
    for v in user_views(catalog) {
        push(
            table_oid(v),
            &v.name,
            namespace_oid_of(catalog, &v.name),
            0,
            "v",
            user_columns(v).count(),
            false,
            false,
            0,
        );
    }
    for r in RELATIONS {
        push(
            r.oid,
            r.name,
            namespace_oid(r.schema),
            if r.kind == "v" { 0 } else { HEAP_AM },
            r.kind,
            r.columns.len(),
            false,
            false,
            0,
        );
    }
    partition_class_columns(catalog, &mut out[start..]);
}

/// pg_class's partitioning columns of the user tables' rows: a
/// partitioned table has no storage (relfilenode 0) and has subclasses
/// once it has partitions; a partition is marked and keeps its bound.
fn partition_class_columns(catalog: &Catalog, out: &mut [Value]) {
    const WIDTH: usize = 33;
    let mut children: Vec<(i64, String)> = Vec::new();
    let mut parents: Vec<i64> = Vec::new();
    for t in catalog.tables().filter(|t| super::partitions::is_partitioned(t)) {
        let Some(spec) = super::partitions::PartitionSpec::decode(t) else { continue };
        if !spec.partitions.is_empty() {
            parents.push(table_oid(t));
        }
        for p in &spec.partitions {
            if let Some(c) = catalog.table_by_name(&p.name) {
                children.push((table_oid(c), super::partitions::bound_text(&p.bound)));
            }
        }
    }
    if children.is_empty() && parents.is_empty() {
        return;
    }
    for row in out.chunks_exact_mut(WIDTH) {
        let Value::Int8(oid) = row[0] else { continue };
        if parents.contains(&oid) {
            row[21] = Value::Bool(true);
        }
        if let Some((_, bound)) = children.iter().find(|(c, _)| *c == oid) {
            row[26] = Value::Bool(true);
            row[32] = Value::Text(bound.clone());
        }
    }
}

/// A partition's link to its partitioned table (inhseqno 1, as
/// PostgreSQL gives every partition).
fn inherits_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    for t in catalog.tables().filter(|t| super::partitions::is_partitioned(t)) {
        let Some(spec) = super::partitions::PartitionSpec::decode(t) else { continue };
        for p in &spec.partitions {
            if let Some(c) = catalog.table_by_name(&p.name) {
                out.extend([Value::Int8(table_oid(c)), Value::Int8(table_oid(t)), Value::Int4(1), Value::Bool(false)]);
            }
        }
    }
}

fn attribute_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    let start = out.len();
    #[allow(clippy::too_many_arguments)]
    let mut push = |rel: i64,
                    name: &str,
                    num: i16,
                    info: ColumnTypeInfo,
                    notnull: bool,
                    hasdef: bool,
                    ndims: i32,
                    identity: &str| {
        let ColumnTypeInfo { type_oid, typmod, len, byval, align, storage, collation } = info;
        out.extend([
            Value::Int8(rel),
            text(name),
            Value::Int8(type_oid),
            Value::Int4(-1),
            Value::Int2(len),
            Value::Int2(num),
            Value::Int4(ndims),
            Value::Int4(-1),
            Value::Int4(typmod),
            Value::Bool(byval),
            text(align),
            text(storage),
            text(""),
            Value::Bool(notnull),
            Value::Bool(hasdef),
            Value::Bool(false),
            text(identity),
            text(""),
            Value::Bool(false),
            Value::Bool(true),
            Value::Int4(0),
            Value::Int8(collation),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ]);
    };
    for t in user_tables(catalog).into_iter().chain(user_sequences(catalog)).chain(user_views(catalog)) {
        let numeric_any = super::views::view_def(t).map(|d| d.numeric_any).unwrap_or_default();
        for (c, col) in user_columns(t) {
            let hasdef = column_default_text(catalog, col).is_some();
            let ty = if numeric_any.contains(&c) { crate::value::NUMERIC_ANY } else { col.ty };
            let ndims = i32::from(matches!(col.ty, pgtier_engine::DataType::Array(_)));
            push(
                table_oid(t),
                &col.name,
                t.attnum(c),
                column_type_info(ty),
                !col.nullable,
                hasdef,
                ndims,
                identity_code(col),
            );
        }
    }
    for TableIndex { table: t, index: i } in all_indexes(catalog) {
        for (k, &c) in i.columns.iter().chain(&i.include).enumerate() {
            let col = &t.columns[c];
            push(index_oid(&i), &col.name, attnum(k), column_type_info(col.ty), false, false, 0, "");
        }
    }
    for r in RELATIONS {
        for (k, col) in r.columns.iter().enumerate() {
            let (info, is_array) = system_column_info(col);
            push(r.oid, col.name, attnum(k), info, false, false, i32::from(is_array), "");
        }
    }
    // A partition's columns are its partitioned table's (inherited once).
    let partitions: Vec<i64> = catalog
        .tables()
        .filter_map(|t| super::partitions::PartitionSpec::decode(t))
        .flat_map(|spec| spec.partitions)
        .filter_map(|p| catalog.table_by_name(&p.name).map(|c| table_oid(c)))
        .collect();
    if !partitions.is_empty() {
        for row in out[start..].chunks_exact_mut(26) {
            if matches!(row[0], Value::Int8(oid) if partitions.contains(&oid)) {
                row[19] = Value::Bool(false);
                row[20] = Value::Int4(1);
            }
        }
    }
    dropped_attribute_rows(catalog, out);
}

/// A system relation's column as pg_attribute shows it: the type's own
/// storage facts, or an array's; and whether it is an array.
fn system_column_info(col: &SysColumn) -> (ColumnTypeInfo, bool) {
    let oid = col.ty.type_oid();
    let TypeMatch { base, is_array } =
        type_by_oid(oid).unwrap_or(TypeMatch { base: &BUILTIN_TYPES[0], is_array: false });
    let mut info = if is_array || matches!(col.ty, T::Arr(_)) {
        ColumnTypeInfo {
            type_oid: oid,
            typmod: -1,
            len: -1,
            byval: false,
            align: if base.align == "d" { "d" } else { "i" },
            storage: "x",
            collation: 0,
        }
    } else {
        ColumnTypeInfo {
            type_oid: oid,
            typmod: -1,
            len: base.len,
            byval: base.byval,
            align: base.align,
            storage: base.storage,
            collation: base.collation,
        }
    };
    if matches!(col.ty, T::Name) {
        info.collation = 950;
    }
    (info, is_array)
}

/// A column ALTER TABLE dropped stays as PostgreSQL leaves it: its
/// number, a placeholder name, no type, attisdropped (clients filter it).
fn dropped_attribute_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    for t in user_tables(catalog) {
        for &num in &t.dropped_attnums {
            let num = i16::try_from(num).unwrap_or(i16::MAX);
            out.extend([
                Value::Int8(table_oid(t)),
                Value::Text(format!("........pg.dropped.{num}........")),
                Value::Int8(0),
                Value::Int4(0),
                Value::Int2(-1),
                Value::Int2(num),
                Value::Int4(0),
                Value::Int4(-1),
                Value::Int4(-1),
                Value::Bool(false),
                text("i"),
                text("x"),
                text(""),
                Value::Bool(false),
                Value::Bool(false),
                Value::Bool(false),
                text(""),
                text(""),
                Value::Bool(true),
                Value::Bool(true),
                Value::Int4(0),
                Value::Int8(0),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]);
        }
    }
}

fn constraint_rows(catalog: &Catalog, out: &mut Vec<Value>) {
    for TableIndex { table: t, index: i } in all_indexes(catalog) {
        if !i.unique {
            continue;
        }
        out.extend([
            Value::Int8(index_constraint_oid(&i)),
            text(short(&i.name)),
            Value::Int8(namespace_oid_of(catalog, &t.name)),
            text(if i.primary { "p" } else { "u" }),
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(true),
            Value::Int8(table_oid(&t)),
            Value::Int8(0),
            Value::Int8(index_oid(&i)),
            Value::Int8(0),
            Value::Int8(0),
            text(" "),
            text(" "),
            text(" "),
            Value::Bool(true),
            Value::Int4(0),
            Value::Bool(true),
            int2array(&t, &i.columns),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ]);
    }
    for t in user_tables(catalog) {
        for f in catalog.foreign_keys_of(t.id) {
            let Some(parent) = catalog.table(f.parent) else { continue };
            let eq: Vec<Value> = f.child_columns.iter().map(|_| Value::Int8(0)).collect();
            let eqs = Value::Text(array_text(Elem::Oid, &eq));
            out.extend([
                Value::Int8(fk_oid(&f)),
                text(short(&f.name)),
                Value::Int8(namespace_oid_of(catalog, &t.name)),
                text("f"),
                Value::Bool(f.timing.deferrable()),
                Value::Bool(f.timing.initially_deferred()),
                Value::Bool(true),
                Value::Int8(table_oid(t)),
                Value::Int8(0),
                Value::Int8(INDEX_BASE + i64::from(f.parent_index.0)),
                Value::Int8(0),
                Value::Int8(table_oid(parent)),
                text("a"),
                text(match f.on_delete {
                    pgtier_engine::FkAction::NoAction => "a",
                    pgtier_engine::FkAction::Cascade => "c",
                    pgtier_engine::FkAction::SetNull => "n",
                }),
                text("s"),
                Value::Bool(true),
                Value::Int4(0),
                Value::Bool(true),
                int2array(t, &f.child_columns),
                int2array(parent, &f.parent_columns),
                eqs.clone(),
                eqs.clone(),
                eqs,
                Value::Null,
                Value::Null,
                Value::Null,
            ]);
        }
        for (k, c) in t.checks.iter().enumerate() {
            out.extend([
                Value::Int8(check_oid(t, k)),
                text(short(&c.name)),
                Value::Int8(namespace_oid_of(catalog, &t.name)),
                text("c"),
                Value::Bool(false),
                Value::Bool(false),
                Value::Bool(true),
                Value::Int8(table_oid(t)),
                Value::Int8(0),
                Value::Int8(0),
                Value::Int8(0),
                Value::Int8(0),
                text(" "),
                text(" "),
                text(" "),
                Value::Bool(true),
                Value::Int4(0),
                Value::Bool(false),
                int2array(t, &check_columns(t, &c.sql)),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Text(c.sql.clone()),
            ]);
        }
    }
}
